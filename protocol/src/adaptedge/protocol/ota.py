"""Over-the-air update messages (type codes 8-11) and their own codec, sans-IO.

The cloud announces a bundle on a device's ``update`` topic (retained): its id, version, size,
SHA-256, the SHA-256 of every chunk and the probation limits. The device asks for chunks on
``fetch`` and gets them on ``chunk`` (or downloads ``url``), and reports what it did with
``UpdateStatus`` on its ``telemetry`` topic (retained, so ``fleet rollout-status`` sees the
latest state of every device). Nothing here is trusted: the bundle itself is verified (hashes,
signature, version in its signed manifest) before it runs.

These messages share the envelope of ``protocol.messages`` (``[kind, *fields]``) but have
their own decoder, so inference traffic never pays for them. Malformed input raises
``ProtocolError``.
"""

from __future__ import annotations

import hashlib
import math
from typing import Annotated, Final

import msgspec
from msgspec import Meta

import adaptedge.protocol.errors as E
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.messages import MAX_TEXT_CHARS, Ident, Text, kind

TYPE_UPDATE: Final = 8
TYPE_FETCH: Final = 9
TYPE_CHUNK: Final = 10
TYPE_STATUS: Final = 11

MAX_CHUNK_BYTES: Final = 512 << 10
MAX_CHUNKS: Final = 16_384
MAX_OTA_MESSAGE_BYTES: Final = MAX_CHUNK_BYTES + 4096
"""A chunk reply with the largest chunk; an announcement of MAX_CHUNKS hashes is ~560 KiB."""
DEFAULT_CHUNK_BYTES: Final = 64 << 10

# Update states a device reports, in the order a rollout goes through them.
ANNOUNCED: Final = "announced"
DOWNLOADING: Final = "downloading"
PROBATION: Final = "probation"
ACTIVE: Final = "active"
ROLLED_BACK: Final = "rolled_back"
REFUSED: Final = "refused"
STATES: Final = (ANNOUNCED, DOWNLOADING, PROBATION, ACTIVE, ROLLED_BACK, REFUSED)

Digest = Annotated[bytes, Meta(min_length=32, max_length=32)]
Count = Annotated[int, Meta(ge=0)]
_STRUCT = {"array_like": True, "gc": False, "omit_defaults": False, "forbid_unknown_fields": True}


class UpdateAnnouncement(msgspec.Struct, tag=kind(TYPE_UPDATE), **_STRUCT):  # type: ignore[call-arg]
    """A bundle offered to a device: an uncompressed ``.tar`` of ``size`` bytes whose SHA-256 is
    ``sha256``, cut into ``chunk_size`` pieces hashed in ``chunk_hashes``. ``url`` (``file://``
    or ``http(s)://``) names where to download it; empty: fetch the chunks over MQTT.

    Probation: for the first ``probation_decisions`` decisions on the new bundle, once at least
    ``min_decisions`` were made, a share of degraded decisions above ``max_degraded_rate`` rolls
    the device back to its previous bundle."""

    rollout: Ident
    bundle_id: Ident
    version: Count
    size: Annotated[int, Meta(ge=1)]
    sha256: Digest
    chunk_size: Annotated[int, Meta(ge=1, le=MAX_CHUNK_BYTES)]
    chunk_hashes: Annotated[list[Digest], Meta(min_length=1, max_length=MAX_CHUNKS)]
    issued_at: float
    url: Text = ""
    probation_decisions: Count = 200
    min_decisions: Count = 20
    max_degraded_rate: Annotated[float, Meta(ge=0.0, le=1.0)] = 0.2

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_hashes)


class ChunkRequest(msgspec.Struct, tag=kind(TYPE_FETCH), **_STRUCT):  # type: ignore[call-arg]
    """A device asks for chunk ``index`` of a bundle (one request per chunk; resend to retry)."""

    device: Ident
    bundle_id: Ident
    index: Count


class ChunkReply(msgspec.Struct, tag=kind(TYPE_CHUNK), **_STRUCT):  # type: ignore[call-arg]
    """One chunk's bytes, or ``error`` (then ``data`` is empty) when the server cannot send it."""

    bundle_id: Ident
    index: Count
    data: Annotated[bytes, Meta(max_length=MAX_CHUNK_BYTES)]
    error: Text = ""


class UpdateStatus(msgspec.Struct, tag=kind(TYPE_STATUS), **_STRUCT):  # type: ignore[call-arg]
    """Where a device stands: ``state`` (one of ``STATES``) about bundle ``bundle_id``, the
    bundle answering its decisions now (``active_bundle_id``, ``active_version``), the one
    kept for rollback, download ``progress`` (0..1) and, for refusals and rollbacks, why."""

    device: Ident
    sent_at: float
    state: Ident
    bundle_id: Text
    active_bundle_id: Text
    active_version: Count
    previous_bundle_id: Text = ""
    rollout: Text = ""
    progress: Annotated[float, Meta(ge=0.0, le=1.0)] = 0.0
    reason: Text = ""


OtaMessage = UpdateAnnouncement | ChunkRequest | ChunkReply | UpdateStatus
_ENCODABLE: Final = frozenset((UpdateAnnouncement, ChunkRequest, ChunkReply, UpdateStatus))
_decoder = msgspec.msgpack.Decoder(OtaMessage)
_encoder = msgspec.msgpack.Encoder()


def encode_ota(message: OtaMessage) -> bytes:
    """Serialize one OTA message; ``ProtocolError`` for a value the wire cannot carry."""
    if type(message) not in _ENCODABLE:
        raise ProtocolError(E.BAD_TYPE, f"cannot encode {type(message).__name__}: not an OTA "
                            "message")
    try:
        return _encoder.encode(message)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(E.BAD_FIELD, f"cannot encode {type(message).__name__}: {exc}"
                            ) from exc


def decode_ota(data: bytes | bytearray | memoryview) -> OtaMessage:
    """Parse and validate one OTA message from untrusted bytes."""
    if len(data) > MAX_OTA_MESSAGE_BYTES:
        raise ProtocolError(E.TOO_LARGE, f"OTA message of {len(data)} bytes exceeds the "
                            f"{MAX_OTA_MESSAGE_BYTES}-byte limit")
    try:
        message: OtaMessage = _decoder.decode(data)
    except Exception as exc:  # DecodeError, UnicodeDecodeError, RecursionError
        raise ProtocolError(E.DECODE_FAILED, f"not an OTA message: {exc}") from None
    if type(message) is UpdateAnnouncement:
        _check_announcement(message)
    elif type(message) is UpdateStatus and (message.state not in STATES
                                            or not math.isfinite(message.sent_at)):
        raise ProtocolError(E.BAD_FIELD, f"update status state {message.state!r} is not one "
                            f"of {STATES} or sent_at is not finite")
    return message


def _check_announcement(m: UpdateAnnouncement) -> None:
    expected = -(-m.size // m.chunk_size)
    if len(m.chunk_hashes) != expected:
        raise ProtocolError(E.BAD_FIELD, f"announcement of {m.size} bytes in chunks of "
                            f"{m.chunk_size} needs {expected} chunk hashes, not "
                            f"{len(m.chunk_hashes)}")
    if not math.isfinite(m.issued_at) or not math.isfinite(m.max_degraded_rate):
        raise ProtocolError(E.NON_FINITE, "announcement times and rates must be finite")
    if m.url and not m.url.startswith(("file://", "http://", "https://")):
        raise ProtocolError(E.BAD_FIELD, f"announcement url {m.url[:80]!r} is not file://, "
                            "http:// or https://")


def chunk_hashes(data: bytes, chunk_size: int) -> list[bytes]:
    """The SHA-256 of every ``chunk_size`` piece of ``data`` (the last may be shorter)."""
    return [hashlib.sha256(data[i:i + chunk_size]).digest()
            for i in range(0, len(data), chunk_size)]


def reason_text(text: str) -> str:
    """``text`` cut to what a status ``reason`` may carry."""
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 3] + "..."
