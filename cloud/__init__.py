"""The cloud fallback service: the bundle's HPC behind MQTT, micro-batched, shared-subscription
workers. Depends on numpy, onnxruntime, paho-mqtt and msgpack only."""

from adaptedge.cloud.connection import TlsFiles
from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.inference import HpcInference
from adaptedge.cloud.service import CloudService

__all__ = ["CloudError", "CloudService", "HpcInference", "TlsFiles"]
