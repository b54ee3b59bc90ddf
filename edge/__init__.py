"""adaptedge on the device: numpy + onnxruntime + paho-mqtt + msgpack, nothing else.

``EdgeRuntime.load(bundle)`` verifies a bundle and walks its policy on live sensors
(``predict``) or replayed rows (``predict_row``), answering locally or escalating to the cloud
HPC through an ``Uplink`` (``MqttUplink`` on a real device).
"""

from edge.decision import Decision
from edge.errors import BundleRefused, EdgeError, OperatingPointError, UplinkConfigError
from edge.mqtt_uplink import MqttUplink
from edge.outbox import Outbox
from edge.runtime import EdgeRuntime
from edge.uplink import Uplink

__all__ = [
    "BundleRefused",
    "Decision",
    "EdgeError",
    "EdgeRuntime",
    "MqttUplink",
    "OperatingPointError",
    "Outbox",
    "Uplink",
    "UplinkConfigError",
]
