"""Wire message types. Plain data; the codec (``protocol.codec``) turns them into bytes and back."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

SCHEMA_VERSION = 1
"""Version of the wire envelope. A message of another version is refused, naming both."""

NO_LABEL = -1
"""``local_label`` when the device has no local answer to offer."""


@dataclass(slots=True)
class InferenceRequest:
    """A device asks the cloud HPC to classify one input.

    ``features`` holds every feature of the bundle as little-endian float32 (4 bytes each);
    ``mask`` marks which were measured (``numpy.packbits`` little bit order). Unmeasured
    slots are sent as 0.0. ``deadline_ms`` counts from ``sent_at`` (device clock): after it,
    the device has answered on its own and a reply is only counted as late.
    """

    request_id: int
    device: str
    bundle_id: str
    sent_at: float
    deadline_ms: float
    features: bytes
    mask: bytes
    local_label: int = NO_LABEL
    local_confidence: float = 0.0

    @property
    def n_features(self) -> int:
        return len(self.features) // 4

    def feature_array(self) -> npt.NDArray[np.float32]:
        return np.frombuffer(self.features, dtype="<f4").astype(np.float32, copy=False)

    def mask_array(self) -> npt.NDArray[np.bool_]:
        bits = np.unpackbits(np.frombuffer(self.mask, dtype=np.uint8), bitorder="little")
        return bits[: self.n_features].astype(bool)


@dataclass(slots=True)
class InferenceReply:
    """The cloud's answer: the HPC's label (class index) and probabilities (float32 bytes)."""

    request_id: int
    device: str
    bundle_id: str
    label: int
    probabilities: bytes
    model_id: str
    server_time: float
    service_ms: float

    def probability_array(self) -> npt.NDArray[np.float32]:
        return np.frombuffer(self.probabilities, dtype="<f4").astype(np.float32, copy=False)


@dataclass(slots=True)
class ErrorReply:
    """The cloud could not answer a request; ``code`` is one of ``protocol.errors.ERROR_CODES``."""

    request_id: int | None
    device: str
    code: str
    message: str
    server_time: float


@dataclass(slots=True)
class Telemetry:
    """Periodic counters from a device or a cloud worker (names to numbers)."""

    source: str
    sent_at: float
    counters: dict[str, float] = field(default_factory=dict)


Message = InferenceRequest | InferenceReply | ErrorReply | Telemetry
MESSAGE_TYPES: tuple[type, ...] = (InferenceRequest, InferenceReply, ErrorReply, Telemetry)
