"""adaptedge on the device: numpy + onnxruntime + paho-mqtt + msgpack, nothing else.

``EdgeRuntime.load(bundle)`` verifies a bundle and walks its policy on live sensors
(``predict``) or replayed rows (``predict_row``), answering locally or escalating to the cloud
HPC through an ``Uplink`` (``MqttUplink`` on a real device). paho-mqtt (and with it ssl, ~9 MiB
resident) is imported only when ``MqttUplink`` is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adaptedge.edge.decision import Decision
from adaptedge.edge.errors import (
    BundleRefused,
    EdgeError,
    OperatingPointError,
    SensorNameError,
    UplinkConfigError,
)
from adaptedge.edge.outbox import Outbox
from adaptedge.edge.runtime import EdgeRuntime
from adaptedge.edge.uplink import Uplink

if TYPE_CHECKING:
    from adaptedge.edge.mqtt_uplink import MqttUplink

__all__ = [
    "BundleRefused",
    "Decision",
    "EdgeError",
    "EdgeRuntime",
    "MqttUplink",
    "OperatingPointError",
    "Outbox",
    "SensorNameError",
    "Uplink",
    "UplinkConfigError",
]


def __getattr__(name: str) -> Any:
    if name == "MqttUplink":
        from adaptedge.edge.mqtt_uplink import MqttUplink

        return MqttUplink
    raise AttributeError(f"module 'edge' has no attribute {name!r}")
