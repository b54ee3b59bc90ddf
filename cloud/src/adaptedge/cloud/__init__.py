"""The cloud fallback service: the bundle's HPC behind MQTT (shared subscriptions) or a NATS
cluster (queue groups), micro-batched. Depends on numpy, onnxruntime, paho-mqtt and msgpack;
nats-py (extra ``nats``) only for ``nats://`` brokers."""

from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.service.inference import HpcInference
from adaptedge.cloud.service.worker import CloudService
from adaptedge.cloud.transport.connection import TlsFiles

__all__ = ["CloudError", "CloudService", "HpcInference", "TlsFiles"]
