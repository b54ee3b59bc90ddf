"""Wire message types (msgspec Structs, encoded as msgpack arrays by ``protocol.codec``).

On the wire each message is ``[kind, *fields]`` where ``kind = schema_version * 256 +
type_code`` (the Struct's tag): one integer says both which version and which message. Field
constraints here (types, ranges, finite numbers) are enforced in C while decoding; the codec adds
the checks msgspec cannot express (feature byte layout, mask, finite feature values).
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec
import numpy as np
import numpy.typing as npt
from msgspec import Meta

SCHEMA_VERSION: Final = 1
"""Version of the wire envelope of every message type but ``ValueReply``. A message of a
version this side does not speak is refused, naming both."""
VALUE_SCHEMA_VERSION: Final = 2
"""The version ``ValueReply`` (a regression HPC's answer) first appears at: a device that
speaks only version 1 refuses it in one line instead of misreading it."""
NEWEST_SCHEMA_VERSION: Final = VALUE_SCHEMA_VERSION

NO_LABEL: Final = -1
"""``local_label`` when the device has no local answer to offer."""

MAX_ID_CHARS: Final = 128
MAX_TEXT_CHARS: Final = 1024
MAX_FEATURES: Final = 1 << 16
MAX_CLASSES: Final = 1 << 12

# Type codes: the wire contract, one table.
TYPE_REQUEST: Final = 1
TYPE_REPLY: Final = 2
TYPE_ERROR: Final = 3
TYPE_TELEMETRY: Final = 4
TYPE_VALUE: Final = 5
TYPE_VERSIONS: Final = {TYPE_REQUEST: SCHEMA_VERSION, TYPE_REPLY: SCHEMA_VERSION,
                        TYPE_ERROR: SCHEMA_VERSION, TYPE_TELEMETRY: SCHEMA_VERSION,
                        TYPE_VALUE: VALUE_SCHEMA_VERSION}
"""Type code -> the schema version it is sent at."""

RequestId = Annotated[int, Meta(ge=0)]
Ident = Annotated[str, Meta(min_length=1, max_length=MAX_ID_CHARS)]
Text = Annotated[str, Meta(max_length=MAX_TEXT_CHARS)]
_FLOAT_MAX: Final = 1.7976931348623157e308  # sys.float_info.max
Finite = Annotated[float, Meta(ge=-_FLOAT_MAX, le=_FLOAT_MAX)]
"""A finite number: the bounds refuse infinities and (every comparison with it being false) NaN."""


def kind(type_code: int, version: int = SCHEMA_VERSION) -> int:
    """The envelope's first element for a message type of a schema version."""
    return version * 256 + type_code

_STRUCT = {"array_like": True, "gc": False, "omit_defaults": False, "forbid_unknown_fields": True}


class InferenceRequest(msgspec.Struct, tag=kind(TYPE_REQUEST), **_STRUCT):
    """A device asks the cloud HPC to classify one input.

    ``features`` holds every feature of the bundle as little-endian float32 (4 bytes each);
    ``mask`` marks which were measured (``numpy.packbits`` little bit order). Unmeasured
    slots are sent as 0.0. ``deadline_ms`` counts from ``sent_at`` (device clock): after it,
    the device has answered on its own and a reply is only counted as late. ``size``: the
    item's size, sent only when the HPC's cost grows with it (left off the wire when None, so
    such requests are byte-identical to those of older devices, which still decode).
    """

    request_id: RequestId
    device: Ident
    bundle_id: Ident
    sent_at: Finite
    deadline_ms: Annotated[float, Meta(gt=0, le=_FLOAT_MAX)]
    features: Annotated[bytes, Meta(min_length=4, max_length=4 * MAX_FEATURES)]
    mask: Annotated[bytes, Meta(min_length=1, max_length=MAX_FEATURES // 8)]
    local_label: Annotated[int, Meta(ge=NO_LABEL, lt=MAX_CLASSES)] = NO_LABEL
    local_confidence: Finite = 0.0
    size: Annotated[float, Meta(ge=0, le=_FLOAT_MAX)] | None = None

    @property
    def n_features(self) -> int:
        return len(self.features) // 4

    def feature_array(self) -> npt.NDArray[np.float32]:
        return np.frombuffer(self.features, dtype="<f4").astype(np.float32, copy=False)

    def mask_array(self) -> npt.NDArray[np.bool_]:
        bits = np.unpackbits(np.frombuffer(self.mask, dtype=np.uint8), bitorder="little")
        return bits[: self.n_features].astype(bool)


class InferenceReply(msgspec.Struct, tag=kind(TYPE_REPLY), **_STRUCT):
    """The cloud's answer: the HPC's label (class index) and probabilities (float32 bytes)."""

    request_id: RequestId
    device: Ident
    bundle_id: Ident
    label: Annotated[int, Meta(ge=0, lt=MAX_CLASSES)]
    probabilities: Annotated[bytes, Meta(min_length=4, max_length=4 * MAX_CLASSES)]
    model_id: Text
    server_time: Finite
    service_ms: Finite

    def probability_array(self) -> npt.NDArray[np.float32]:
        return np.frombuffer(self.probabilities, dtype="<f4").astype(np.float32, copy=False)


class ValueReply(msgspec.Struct, tag=kind(TYPE_VALUE, VALUE_SCHEMA_VERSION), **_STRUCT):
    """A regression HPC's answer: the predicted value (finite, in the target's units)."""

    request_id: RequestId
    device: Ident
    bundle_id: Ident
    value: Finite
    model_id: Text
    server_time: Finite
    service_ms: Finite


class ErrorReply(msgspec.Struct, tag=kind(TYPE_ERROR), **_STRUCT):
    """The cloud could not answer a request; ``code`` is one of ``protocol.errors.ERROR_CODES``."""

    request_id: RequestId | None
    device: Ident
    code: Ident
    message: Text
    server_time: Finite


class Telemetry(msgspec.Struct, tag=kind(TYPE_TELEMETRY), **_STRUCT):
    """Periodic counters from a device or a cloud worker (names to numbers)."""

    source: Ident
    sent_at: float
    counters: Annotated[dict[Ident, float], Meta(max_length=256)] = msgspec.field(
        default_factory=dict)


Message = InferenceRequest | InferenceReply | ErrorReply | Telemetry | ValueReply
MESSAGE_TYPES: tuple[type, ...] = (InferenceRequest, InferenceReply, ErrorReply, Telemetry,
                                   ValueReply)
Reply = InferenceReply | ValueReply | ErrorReply
"""What the cloud answers a request with."""
