"""adaptedge contracts, sans-IO: wire messages and codec, topics, errors, the bundle manifest
and its policy graph."""

from adaptedge.protocol.bundle import open_bundle, read_manifest, verify, write_bundle
from adaptedge.protocol.codec import decode, encode
from adaptedge.protocol.errors import BundleError, ProtocolError
from adaptedge.protocol.features import pack_features
from adaptedge.protocol.manifest import (
    CostWeights,
    HpcRef,
    LinkSpec,
    Manifest,
    OperatingPoint,
    SensorSpec,
)
from adaptedge.protocol.messages import (
    SCHEMA_VERSION,
    ErrorReply,
    InferenceReply,
    InferenceRequest,
    Message,
    Telemetry,
    ValueReply,
)
from adaptedge.protocol.policy_graph import Action, ModelRef, PolicyGraph, PolicyNode

__all__ = [
    "SCHEMA_VERSION",
    "Action",
    "BundleError",
    "CostWeights",
    "ErrorReply",
    "HpcRef",
    "InferenceReply",
    "InferenceRequest",
    "LinkSpec",
    "Manifest",
    "Message",
    "ModelRef",
    "OperatingPoint",
    "PolicyGraph",
    "PolicyNode",
    "ProtocolError",
    "SensorSpec",
    "Telemetry",
    "ValueReply",
    "decode",
    "encode",
    "open_bundle",
    "pack_features",
    "read_manifest",
    "verify",
    "write_bundle",
]
