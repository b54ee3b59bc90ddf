"""The cloud fallback service: the bundle's HPC behind MQTT, micro-batched, shared-subscription
workers. Depends on numpy, onnxruntime, paho-mqtt and msgpack only."""

from cloud.connection import TlsFiles
from cloud.errors import CloudError
from cloud.inference import HpcInference
from cloud.service import CloudService

__all__ = ["CloudError", "CloudService", "HpcInference", "TlsFiles"]
