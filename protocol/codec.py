"""msgpack codec for wire messages, sans-IO: ``encode(message) -> bytes``, ``decode(bytes) -> message``.

Every message is a msgpack array ``[schema_version, type_code, *fields]``. Decoding untrusted
bytes uses a size limit, ``raw=False``, ``strict_map_key=True`` and no ext types; anything
malformed raises ``ProtocolError`` and nothing else.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Final

import msgpack
import numpy as np

from protocol import errors as E
from protocol.errors import ProtocolError
from protocol.messages import (
    NO_LABEL,
    SCHEMA_VERSION,
    ErrorReply,
    InferenceReply,
    InferenceRequest,
    Message,
    Telemetry,
)

MAX_MESSAGE_BYTES: Final = 1 << 20
MAX_FEATURES: Final = 1 << 16
MAX_CLASSES: Final = 1 << 12
MAX_ID_CHARS: Final = 128
MAX_TEXT_CHARS: Final = 1024
MAX_COUNTERS: Final = 256
UINT64_MAX: Final = (1 << 64) - 1

# One table of type codes: the wire contract.
TYPE_REQUEST: Final = 1
TYPE_REPLY: Final = 2
TYPE_ERROR: Final = 3
TYPE_TELEMETRY: Final = 4
TYPE_CODES: Final[dict[type, int]] = {
    InferenceRequest: TYPE_REQUEST,
    InferenceReply: TYPE_REPLY,
    ErrorReply: TYPE_ERROR,
    Telemetry: TYPE_TELEMETRY,
}

_LITTLE_ENDIAN = sys.byteorder == "little"
_UNPACK_LIMITS: Final = {
    "raw": False,
    "strict_map_key": True,
    "use_list": True,
    "max_bin_len": MAX_MESSAGE_BYTES,
    "max_str_len": MAX_TEXT_CHARS * 4,
    "max_array_len": 16,
    "max_map_len": MAX_COUNTERS,
    "max_ext_len": 0,
}
_packb = msgpack.packb


def encode(message: Message) -> bytes:
    """Serialize one message. Raises ``ProtocolError`` for a value the wire cannot carry."""
    try:
        return _encode(message)
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, ProtocolError):
            raise
        raise ProtocolError(E.BAD_FIELD, f"cannot encode {type(message).__name__}: {exc}") from exc


def _encode(message: Message) -> bytes:
    kind = type(message)
    if kind is InferenceRequest:
        m: Any = message
        return _packb(
            (SCHEMA_VERSION, TYPE_REQUEST, m.request_id, m.device, m.bundle_id, m.sent_at,
             m.deadline_ms, m.features, m.mask, m.local_label, m.local_confidence),
            use_bin_type=True,
        )
    if kind is InferenceReply:
        m = message
        return _packb(
            (SCHEMA_VERSION, TYPE_REPLY, m.request_id, m.device, m.bundle_id, m.label,
             m.probabilities, m.model_id, m.server_time, m.service_ms),
            use_bin_type=True,
        )
    if kind is ErrorReply:
        m = message
        return _packb(
            (SCHEMA_VERSION, TYPE_ERROR, m.request_id, m.device, m.code, m.message, m.server_time),
            use_bin_type=True,
        )
    if kind is Telemetry:
        m = message
        return _packb(
            (SCHEMA_VERSION, TYPE_TELEMETRY, m.source, m.sent_at, m.counters), use_bin_type=True
        )
    raise ProtocolError(E.BAD_TYPE, f"cannot encode {kind.__name__}: not a wire message type")


def decode(data: bytes | bytearray | memoryview) -> Message:
    """Parse and validate one message from untrusted bytes."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            E.TOO_LARGE, f"message of {len(data)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit"
        )
    try:
        obj = msgpack.unpackb(data, **_UNPACK_LIMITS)
    except Exception as exc:  # msgpack raises several unrelated types on malformed input
        raise ProtocolError(E.DECODE_FAILED, f"not a msgpack message ({type(exc).__name__})") from exc
    if type(obj) is not list or len(obj) < 2:
        raise ProtocolError(E.DECODE_FAILED, "expected a msgpack array [version, type, ...]")
    version = obj[0]
    if version != SCHEMA_VERSION or type(version) is not int:
        raise ProtocolError(
            E.BAD_SCHEMA_VERSION,
            f"message has schema version {version!r}; this side speaks version {SCHEMA_VERSION}: "
            "upgrade the older side",
        )
    code = obj[1]
    if code == TYPE_REQUEST and type(code) is int:
        return _decode_request(obj)
    if code == TYPE_REPLY and type(code) is int:
        return _decode_reply(obj)
    if code == TYPE_ERROR and type(code) is int:
        return _decode_error(obj)
    if code == TYPE_TELEMETRY and type(code) is int:
        return _decode_telemetry(obj)
    raise ProtocolError(E.BAD_TYPE, f"unknown message type code {code!r}")


def _arity(obj: list[Any], n: int, what: str) -> None:
    if len(obj) != n:
        raise ProtocolError(E.BAD_FIELD, f"{what} has {len(obj) - 2} fields, expected {n - 2}")


def _uint64(value: Any, name: str) -> int:
    if type(value) is not int or not 0 <= value <= UINT64_MAX:
        raise ProtocolError(E.BAD_FIELD, f"{name} must be an unsigned 64-bit integer, got {value!r:.40}")
    return value


def _ident(value: Any, name: str) -> str:
    if type(value) is not str or not 0 < len(value) <= MAX_ID_CHARS:
        raise ProtocolError(E.BAD_FIELD, f"{name} must be a string of 1..{MAX_ID_CHARS} characters")
    return value


def _text(value: Any, name: str) -> str:
    if type(value) is not str or len(value) > MAX_TEXT_CHARS:
        raise ProtocolError(E.BAD_FIELD, f"{name} must be a string of at most {MAX_TEXT_CHARS} characters")
    return value


def _number(value: Any, name: str) -> float:
    kind = type(value)
    if kind is float:
        if math.isfinite(value):
            return value  # type: ignore[no-any-return]
    elif kind is int:
        return float(value)
    raise ProtocolError(E.BAD_FIELD, f"{name} must be a finite number, got {value!r:.40}")


def _float32_bytes(value: Any, name: str, limit: int) -> bytes:
    if type(value) is not bytes or len(value) % 4 or not 0 < len(value) <= 4 * limit:
        raise ProtocolError(
            E.BAD_FEATURES,
            f"{name} must be 1..{limit} little-endian float32 values (a byte string of a multiple of 4)",
        )
    return value


def _all_finite(buf: bytes) -> bool:
    # Summing float32 values as doubles cannot overflow, so the sum is finite iff every value is.
    if _LITTLE_ENDIAN:
        return math.isfinite(sum(memoryview(buf).cast("f")))
    return bool(np.isfinite(np.frombuffer(buf, dtype="<f4")).all())


def _decode_request(obj: list[Any]) -> InferenceRequest:
    _arity(obj, 11, "request")
    _, _, rid, device, bundle_id, sent_at, deadline_ms, features, mask, label, confidence = obj
    features = _float32_bytes(features, "features", MAX_FEATURES)
    n = len(features) >> 2
    if type(mask) is not bytes or len(mask) != (n + 7) >> 3:
        raise ProtocolError(
            E.BAD_FEATURES, f"mask must be {(n + 7) >> 3} packed bytes for {n} features"
        )
    if n & 7 and mask[-1] >> (n & 7):
        raise ProtocolError(E.BAD_FEATURES, "mask has bits set beyond the last feature")
    if not _all_finite(features):
        values = np.frombuffer(features, dtype="<f4")
        measured = np.unpackbits(np.frombuffer(mask, dtype=np.uint8), bitorder="little")[:n]
        bad = np.flatnonzero(~np.isfinite(values) & measured.astype(bool))
        if bad.size:
            raise ProtocolError(
                E.NON_FINITE,
                f"measured feature(s) {bad[:8].tolist()} are NaN or infinite: "
                "mark a failed sensor as unmeasured instead",
            )
    if type(label) is not int or not NO_LABEL <= label < MAX_CLASSES:
        raise ProtocolError(E.BAD_FIELD, f"local_label must be -1 or a class index, got {label!r:.40}")
    deadline = _number(deadline_ms, "deadline_ms")
    if deadline <= 0:
        raise ProtocolError(E.BAD_FIELD, f"deadline_ms must be positive, got {deadline}")
    return InferenceRequest(
        _uint64(rid, "request_id"),
        _ident(device, "device"),
        _ident(bundle_id, "bundle_id"),
        _number(sent_at, "sent_at"),
        deadline,
        features,
        mask,
        label,
        _number(confidence, "local_confidence"),
    )


def _decode_reply(obj: list[Any]) -> InferenceReply:
    _arity(obj, 10, "reply")
    _, _, rid, device, bundle_id, label, probabilities, model_id, server_time, service_ms = obj
    probabilities = _float32_bytes(probabilities, "probabilities", MAX_CLASSES)
    if not _all_finite(probabilities):
        raise ProtocolError(E.NON_FINITE, "probabilities contain NaN or infinity")
    n_classes = len(probabilities) >> 2
    if type(label) is not int or not 0 <= label < n_classes:
        raise ProtocolError(E.BAD_FIELD, f"label must be a class index below {n_classes}, got {label!r:.40}")
    return InferenceReply(
        _uint64(rid, "request_id"),
        _ident(device, "device"),
        _ident(bundle_id, "bundle_id"),
        label,
        probabilities,
        _text(model_id, "model_id"),
        _number(server_time, "server_time"),
        _number(service_ms, "service_ms"),
    )


def _decode_error(obj: list[Any]) -> ErrorReply:
    _arity(obj, 7, "error reply")
    _, _, rid, device, code, message, server_time = obj
    return ErrorReply(
        None if rid is None else _uint64(rid, "request_id"),
        _ident(device, "device"),
        _ident(code, "code"),
        _text(message, "message"),
        _number(server_time, "server_time"),
    )


def _decode_telemetry(obj: list[Any]) -> Telemetry:
    _arity(obj, 5, "telemetry")
    _, _, source, sent_at, counters = obj
    if type(counters) is not dict:
        raise ProtocolError(E.BAD_FIELD, "counters must be a map of names to numbers")
    clean: dict[str, float] = {}
    for key, value in counters.items():
        _ident(key, "counter name")
        if type(value) is int:
            clean[key] = value
        elif type(value) is float:
            clean[key] = value  # non-finite allowed: a p99 of nothing is NaN
        else:
            raise ProtocolError(E.BAD_FIELD, f"counter {key!r} must be a number")
    return Telemetry(_ident(source, "source"), _number(sent_at, "sent_at"), clean)
