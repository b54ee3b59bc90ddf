"""msgpack codec for wire messages, sans-IO: ``encode(message) -> bytes``, ``decode(bytes) -> message``.

Every message is a msgpack array ``[kind, *fields]`` with ``kind = schema_version * 256 +
type_code``. Decoding is two-tier: msgspec decodes and validates the field types and ranges
in C (as fast as a plain msgpack round trip), then the request checks msgspec cannot express
(feature byte layout, mask, finite measured features) run in one C call
(``protocol/_speedups.c``; the same checks in Python where it was not built). Anything
rejected is re-read with
msgpack (``raw=False``, ``strict_map_key=True``, length-bounded) by the diagnosing path,
which finds exactly what is wrong. Either way, malformed input raises ``ProtocolError`` and
nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

import msgpack
import msgspec
import numpy as np

import adaptedge.protocol.errors as E
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.features import all_finite
from adaptedge.protocol.messages import (
    MAX_CLASSES,
    MAX_FEATURES,
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    NEWEST_SCHEMA_VERSION,
    NO_LABEL,
    SCHEMA_VERSION,
    TYPE_ERROR,
    TYPE_REPLY,
    TYPE_REQUEST,
    TYPE_TELEMETRY,
    TYPE_VALUE,
    TYPE_VERSIONS,
    ErrorReply,
    InferenceReply,
    InferenceRequest,
    Message,
    Telemetry,
    ValueReply,
    kind,
)

MAX_MESSAGE_BYTES: Final = 1 << 20
MAX_COUNTERS: Final = 256

_ENCODABLE: Final = frozenset((InferenceRequest, InferenceReply, ErrorReply, Telemetry,
                               ValueReply))
# msgspec's Encoder and Decoder are thread-safe (msgspec >= 0.16): one of each serves all threads.
_encoder: Final = msgspec.msgpack.Encoder()
_decoder: Final = msgspec.msgpack.Decoder(Message)
_encode: Final = _encoder.encode
_decode: Final = _decoder.decode
_SIZELESS_HEAD: Final = b"\x9a"
_PAD_LIMIT: Final = {d: 1 << (8 - d // 4) for d in range(0, 32, 4)}
"""Request layout: ``d = 32 * len(mask) - len(features)`` is in this table iff the features
are whole float32 values and the mask has exactly one bit per feature; the mask's last byte
must then be below ``_PAD_LIMIT[d]`` (its ``d // 4`` padding bits clear)."""


def _request_ok_py(features: bytes, mask: bytes) -> bool:
    """Whole float32 features, one mask bit per feature with clear padding, every measured
    feature finite: ``_speedups.request_ok`` in Python (the codec's fallback)."""
    if mask[-1] >= _PAD_LIMIT.get((len(mask) << 5) - len(features), 0):
        return False
    return all_finite(features) or _measured_finite(features, mask)  # NaN of unmeasured is ok


def _sizeless_py(encoded: bytes) -> bytes:
    """A request encoded with its 11th field (size) nil, in the 10-element layout older
    devices send: the fixarray header 0x9b -> 0x9a and the trailing nil dropped."""
    return _SIZELESS_HEAD + encoded[1:-1]


_request_ok: Callable[[bytes, bytes], bool]
_sizeless: Callable[[bytes], bytes]
try:
    import adaptedge.protocol._speedups as _speedups
except ImportError:  # built without a C compiler: the same in Python
    _request_ok, _sizeless = _request_ok_py, _sizeless_py
else:
    _request_ok, _sizeless = _speedups.request_ok, _speedups.sizeless


def encode(message: Message) -> bytes:
    """Serialize one message. Raises ``ProtocolError`` for a value the wire cannot carry."""
    kind_ = message.__class__
    try:
        if kind_ is InferenceRequest:
            if message.size is not None:  # type: ignore[union-attr]
                return _encode(message)
            # A request without a size as older devices send it; the exact-bytes test pins
            # this layout.
            return _sizeless(_encode(message))
        if kind_ in _ENCODABLE:
            return _encode(message)
    except (TypeError, ValueError, OverflowError) as exc:  # msgspec.EncodeError is a ValueError
        raise ProtocolError(E.BAD_FIELD, f"cannot encode {kind_.__name__}: {exc}") from exc
    raise ProtocolError(E.BAD_TYPE, f"cannot encode {kind_.__name__}: not a wire message")


def decode(data: bytes | bytearray | memoryview) -> Message:
    """Parse and validate one message from untrusted bytes."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            E.TOO_LARGE, f"message of {len(data)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit"
        )
    try:
        message = _decode(data)
    except Exception as exc:  # DecodeError, but also UnicodeDecodeError, RecursionError
        raise _diagnose(data, f"{type(exc).__name__}: {exc}") from None
    kind_ = message.__class__
    if kind_ is InferenceRequest:
        # msgspec checked types, ranges, finite numbers and a non-empty mask in C; the rest:
        # byte layout, mask length and padding, finite measured features.
        if _request_ok(message.features, message.mask):
            return message  # type: ignore[no-any-return]
    elif kind_ is InferenceReply:
        if _reply_ok(message):
            return message  # type: ignore[no-any-return]
    else:  # error reply, telemetry, value reply: all checked in C
        return message  # type: ignore[no-any-return]
    raise _diagnose(data, "a field is out of range")


def _measured_finite(features: bytes, mask: bytes) -> bool:
    """Non-finite values are allowed in unmeasured slots only."""
    values = np.frombuffer(features, dtype="<f4")
    measured = np.unpackbits(np.frombuffer(mask, dtype=np.uint8), bitorder="little")[: values.size]
    return not bool((~np.isfinite(values) & measured.astype(bool)).any())


def _reply_ok(m: InferenceReply) -> bool:
    nbytes = len(m.probabilities)
    return (
        not nbytes & 3
        and m.label < nbytes >> 2
        and all_finite(m.probabilities)
    )


# -- the diagnosing path: find exactly what is wrong -----------------------------------------
def _diagnose(data: bytes | bytearray | memoryview, fallback: str) -> ProtocolError:
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types on malformed input
        return ProtocolError(E.DECODE_FAILED, f"not a msgpack message ({type(exc).__name__})")
    try:
        _check_envelope(obj)
    except ProtocolError as exc:
        return exc
    return ProtocolError(E.BAD_FIELD, fallback)


def _check_envelope(obj: Any) -> None:
    if type(obj) is not list or not obj:
        raise ProtocolError(E.DECODE_FAILED, "expected a msgpack array [kind, ...]")
    head = obj[0]
    if type(head) is not int or head < 0:
        raise ProtocolError(E.BAD_TYPE, f"message kind must be a non-negative integer, got {_brief(head)}")
    check_kind(head)
    _CHECKS[head & 255](obj)


def check_kind(head: int, newest: int = NEWEST_SCHEMA_VERSION) -> None:
    """Refuse an envelope kind (``version * 256 + type``) this side cannot read, in one line:
    a version outside 1..``newest`` (a side built before version 2 had ``newest`` 1, so it
    refuses a ``ValueReply`` with "message has schema version 2; this side speaks version
    1"), an unknown type, or a type sent at another version than its own."""
    version, code = divmod(head, 256)
    if not SCHEMA_VERSION <= version <= newest:
        spoken = (f"version {SCHEMA_VERSION}" if newest == SCHEMA_VERSION
                  else f"versions {SCHEMA_VERSION} to {newest}")
        raise ProtocolError(
            E.BAD_SCHEMA_VERSION,
            f"message has schema version {version}; this side speaks {spoken}: "
            "upgrade the older side",
        )
    own = TYPE_VERSIONS.get(code)
    if own is None or code not in _CHECKS or own > newest:
        raise ProtocolError(E.BAD_TYPE, f"unknown message type code {code}")
    if own != version:
        raise ProtocolError(
            E.BAD_SCHEMA_VERSION,
            f"message type {code} has schema version {version}; this side speaks it at version "
            f"{own}: upgrade the older side",
        )


def _arity(obj: list[Any], n: int, what: str, optional: int = 0) -> list[Any]:
    """Check the field count; trailing fields with defaults may be omitted (pads with None)."""
    if not n - optional <= len(obj) <= n:
        expected = f"{n - 1 - optional}..{n - 1}" if optional else f"{n - 1}"
        raise ProtocolError(E.BAD_FIELD, f"{what} has {len(obj) - 1} fields, expected {expected}")
    return obj + [_OMITTED] * (n - len(obj))


def _brief(value: Any) -> str:
    """A short, safe description of an untrusted value (no repr of deep containers)."""
    if isinstance(value, int | float | bool | type(None)):
        return repr(value)
    if isinstance(value, str | bytes):
        return repr(value[:40])
    return f"a {type(value).__name__}"


class _Omitted:
    """A trailing field left out: its default applies."""


_OMITTED: Final = _Omitted()


def _uint64(value: Any, name: str) -> None:
    if type(value) is not int or value < 0:
        raise ProtocolError(E.BAD_FIELD, f"{name} must be an unsigned 64-bit integer, got {_brief(value)}")


def _ident(value: Any, name: str) -> None:
    if type(value) is not str or not 0 < len(value) <= MAX_ID_CHARS:
        raise ProtocolError(E.BAD_FIELD, f"{name} must be a string of 1..{MAX_ID_CHARS} characters")


def _text(value: Any, name: str) -> None:
    if type(value) is not str or len(value) > MAX_TEXT_CHARS:
        raise ProtocolError(E.BAD_FIELD, f"{name} must be a string of at most {MAX_TEXT_CHARS} characters")


def _number(value: Any, name: str) -> None:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise ProtocolError(E.BAD_FIELD, f"{name} must be a finite number, got {_brief(value)}")


def _float32_bytes(value: Any, name: str, limit: int) -> None:
    if type(value) is not bytes or len(value) % 4 or not 0 < len(value) <= 4 * limit:
        raise ProtocolError(
            E.BAD_FEATURES,
            f"{name} must be 1..{limit} little-endian float32 values (a byte string of a multiple of 4)",
        )


def _check_request(obj: list[Any]) -> None:
    fields = _arity(obj, 11, "request", optional=3)
    _, rid, device, bundle_id, sent_at, deadline_ms, features, mask, label, confidence, size = fields
    if size is not _OMITTED and size is not None:
        _number(size, "size")
        if size < 0:
            raise ProtocolError(E.BAD_FIELD, f"size must be >= 0, got {size}")
    label = NO_LABEL if label is _OMITTED else label
    confidence = 0.0 if confidence is _OMITTED else confidence
    _float32_bytes(features, "features", MAX_FEATURES)
    n = len(features) >> 2
    if type(mask) is not bytes or len(mask) != (n + 7) >> 3:
        raise ProtocolError(E.BAD_FEATURES, f"mask must be {(n + 7) >> 3} packed bytes for {n} features")
    if n & 7 and mask[-1] >> (n & 7):
        raise ProtocolError(E.BAD_FEATURES, "mask has bits set beyond the last feature")
    if not all_finite(features):
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
        raise ProtocolError(E.BAD_FIELD, f"local_label must be -1 or a class index, got {_brief(label)}")
    _number(deadline_ms, "deadline_ms")
    if deadline_ms <= 0:
        raise ProtocolError(E.BAD_FIELD, f"deadline_ms must be positive, got {deadline_ms}")
    _uint64(rid, "request_id")
    _ident(device, "device")
    _ident(bundle_id, "bundle_id")
    _number(sent_at, "sent_at")
    _number(confidence, "local_confidence")


def _check_reply(obj: list[Any]) -> None:
    _arity(obj, 9, "reply")
    _, rid, device, bundle_id, label, probabilities, model_id, server_time, service_ms = obj
    _float32_bytes(probabilities, "probabilities", MAX_CLASSES)
    if not all_finite(probabilities):
        raise ProtocolError(E.NON_FINITE, "probabilities contain NaN or infinity")
    n_classes = len(probabilities) >> 2
    if type(label) is not int or not 0 <= label < n_classes:
        raise ProtocolError(E.BAD_FIELD, f"label must be a class index below {n_classes}, got {_brief(label)}")
    _uint64(rid, "request_id")
    _ident(device, "device")
    _ident(bundle_id, "bundle_id")
    _text(model_id, "model_id")
    _number(server_time, "server_time")
    _number(service_ms, "service_ms")


def _check_error(obj: list[Any]) -> None:
    _arity(obj, 6, "error reply")
    _, rid, device, code, message, server_time = obj
    if rid is not None:
        _uint64(rid, "request_id")
    _ident(device, "device")
    _ident(code, "code")
    _text(message, "message")
    _number(server_time, "server_time")


def _check_value(obj: list[Any]) -> None:
    _arity(obj, 8, "value reply")
    _, rid, device, bundle_id, value, model_id, server_time, service_ms = obj
    _uint64(rid, "request_id")
    _ident(device, "device")
    _ident(bundle_id, "bundle_id")
    if type(value) in (int, float) and not math.isfinite(value):
        raise ProtocolError(E.NON_FINITE, f"value must be a finite number, got {_brief(value)}")
    _number(value, "value")
    _text(model_id, "model_id")
    _number(server_time, "server_time")
    _number(service_ms, "service_ms")


def _check_telemetry(obj: list[Any]) -> None:
    obj = _arity(obj, 4, "telemetry", optional=1)
    if obj[3] is _OMITTED:
        obj[3] = {}
    _, source, sent_at, counters = obj
    _ident(source, "source")
    _number(sent_at, "sent_at")
    if type(counters) is not dict or len(counters) > MAX_COUNTERS:
        raise ProtocolError(E.BAD_FIELD, f"counters must be a map of at most {MAX_COUNTERS} names to numbers")
    for key, value in counters.items():
        _ident(key, "counter name")
        if type(value) not in (int, float):
            raise ProtocolError(E.BAD_FIELD, f"counter {_brief(key)} must be a number")


_CHECKS: Final = {
    TYPE_REQUEST: _check_request,
    TYPE_REPLY: _check_reply,
    TYPE_ERROR: _check_error,
    TYPE_TELEMETRY: _check_telemetry,
    TYPE_VALUE: _check_value,
}
KINDS: Final = {cls: kind(code, TYPE_VERSIONS[code]) for cls, code in (
    (InferenceRequest, TYPE_REQUEST), (InferenceReply, TYPE_REPLY),
    (ErrorReply, TYPE_ERROR), (Telemetry, TYPE_TELEMETRY), (ValueReply, TYPE_VALUE))}
