"""The cloud fallback service: the bundle's HPC behind MQTT (shared subscriptions) or a NATS
cluster (queue groups), micro-batched. Depends on numpy, onnxruntime, paho-mqtt and msgpack;
nats-py (extra ``nats``) only for ``nats://`` brokers."""

from adaptedge.cloud.connection import TlsFiles
from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.inference import HpcInference
from adaptedge.cloud.service import CloudService

__all__ = ["CloudError", "CloudService", "HpcInference", "TlsFiles"]
