"""Store-and-forward messages: an outbox record (device -> cloud, ``store`` topic) and the
cloud's acknowledgement (cloud -> device, ``stored`` topic).

A record wraps the wire encoding of the ``InferenceRequest`` the device kept, with what the
cloud needs to store it as a labelled row: the kind (``escalated`` or ``audit``, see
``protocol.fleet_rows``), the index of the operating point the device was at and the audit
fraction it used there (absent in records of older devices: decoded as None), and for a
regression bundle the device's own value (``local_value``: what an audit compares with the
HPC's; absent from every classification record, which is encoded byte for byte as before
this field existed). A record is
identified by ``(device, request id, digest)``, the digest being a hash of the request's bytes:
the cloud inserts each key once and acknowledges every copy it receives, and the device deletes
its file only on an acknowledgement of that key. Both messages are msgpack arrays tagged like
the other wire messages, decoded by their own msgspec decoder (``ProtocolError`` on anything
malformed).
"""

from __future__ import annotations

import hashlib
import math
from typing import Annotated, Final, Literal

import msgspec
from msgspec import Meta

import adaptedge.protocol.errors as E
from adaptedge.protocol.codec import MAX_MESSAGE_BYTES, decode
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.fleet_rows import ROW_KINDS, RowKind
from adaptedge.protocol.messages import (
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    Finite,
    InferenceRequest,
    kind,
)

TYPE_STORE_RECORD: Final = 16
TYPE_STORE_ACK: Final = 17
DIGEST_BYTES: Final = 16

AckStatus = Literal["stored", "duplicate", "refused"]
"""``stored``: committed now; ``duplicate``: already held (a resend); ``refused``: the record
can never be stored (malformed, or names another device): the device drops it."""
ACK_STATUSES: tuple[AckStatus, ...] = ("stored", "duplicate", "refused")

_STRUCT = {"array_like": True, "gc": False, "omit_defaults": False, "forbid_unknown_fields": True}
Ident = Annotated[str, Meta(min_length=1, max_length=MAX_ID_CHARS)]


class StoreRecord(msgspec.Struct, tag=kind(TYPE_STORE_RECORD), **_STRUCT):
    """One outbox record: ``request`` is the encoded ``InferenceRequest``; ``audit_fraction``
    the fraction of local decisions the device audited at ``point`` (0: it audits none);
    ``local_value``: a regression device's own answer (finite, the target's unit), None for
    classification."""

    kind: RowKind
    point: Annotated[int, Meta(ge=0)] | None
    request: Annotated[bytes, Meta(min_length=1, max_length=MAX_MESSAGE_BYTES)]
    audit_fraction: Annotated[float, Meta(ge=0.0, le=1.0)] | None = None
    local_value: Finite | None = None


class _LabelRecord(msgspec.Struct, tag=kind(TYPE_STORE_RECORD), **_STRUCT):
    """A record without ``local_value``: the encoding of every classification record (the
    fields and bytes of records before regression)."""

    kind: RowKind
    point: int | None
    request: bytes
    audit_fraction: float | None = None


class StoreAck(msgspec.Struct, tag=kind(TYPE_STORE_ACK), **_STRUCT):
    """The cloud holds (or will never hold) the record ``(device, request_id, digest)``."""

    device: Ident
    request_id: Annotated[int, Meta(ge=0)]
    digest: Annotated[bytes, Meta(min_length=DIGEST_BYTES, max_length=DIGEST_BYTES)]
    status: AckStatus
    message: Annotated[str, Meta(max_length=MAX_TEXT_CHARS)] = ""


_record_decoder = msgspec.msgpack.Decoder(StoreRecord)
_ack_decoder = msgspec.msgpack.Decoder(StoreAck)
_encoder = msgspec.msgpack.Encoder()


def record_digest(request_bytes: bytes) -> bytes:
    """The content digest of a record: a hash of its request's bytes."""
    return hashlib.blake2b(request_bytes, digest_size=DIGEST_BYTES,
                           person=b"adaptedge-store").digest()


def encode_record(record: StoreRecord) -> bytes:
    if record.kind not in ROW_KINDS:
        raise ProtocolError(E.BAD_FIELD, f"record kind {record.kind!r} is not one of {ROW_KINDS}")
    fraction = record.audit_fraction
    if fraction is not None and not 0.0 <= fraction <= 1.0:
        raise ProtocolError(E.BAD_FIELD, f"audit fraction {fraction!r} is not in [0, 1]")
    value = record.local_value
    if value is None:
        return _encoder.encode(_LabelRecord(record.kind, record.point, record.request,
                                            fraction))
    if not math.isfinite(value):
        raise ProtocolError(E.BAD_FIELD, f"local value {value!r} is not a finite number")
    return _encoder.encode(record)


def encode_ack(ack: StoreAck) -> bytes:
    return _encoder.encode(ack)


def decode_record(data: bytes | bytearray | memoryview) -> tuple[StoreRecord, InferenceRequest]:
    """The record and its decoded request; ``ProtocolError`` if either is malformed."""
    if len(data) > MAX_MESSAGE_BYTES + 80:
        raise ProtocolError(E.TOO_LARGE, f"a store record of {len(data)} bytes is larger than "
                            f"the limit of {MAX_MESSAGE_BYTES}")
    try:
        record = _record_decoder.decode(data)
    except msgspec.DecodeError as exc:  # includes ValidationError
        raise ProtocolError(E.BAD_FIELD, f"not a store record: {exc}") from None
    request = decode(record.request)
    if type(request) is not InferenceRequest:
        raise ProtocolError(E.BAD_TYPE, f"a store record must wrap an inference request, not "
                            f"a {type(request).__name__}")
    return record, request


def decode_ack(data: bytes | bytearray | memoryview) -> StoreAck:
    try:
        return _ack_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise ProtocolError(E.BAD_FIELD, f"not a store acknowledgement: {exc}") from None
