"""Store records of regression devices (issue 33): a record may carry the device's own value
(``local_value``); a classification record is encoded byte for byte as before that field
existed (four fields after the tag), and old records decode with no value."""

from __future__ import annotations

import math

import msgspec
import pytest

from adaptedge.protocol.codec import encode
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.messages import InferenceRequest, kind
from adaptedge.protocol.store_wire import (
    TYPE_STORE_RECORD,
    StoreRecord,
    decode_record,
    encode_record,
)

REQUEST = InferenceRequest(7, "dev1", "bundle-1", 0.5, 200.0, b"\x00" * 12, b"\x07")


@pytest.mark.parametrize("fraction", [0.02, None])
def test_classification_records_keep_their_bytes(fraction: float | None) -> None:
    wire = encode(REQUEST)
    data = encode_record(StoreRecord("audit", 1, wire, fraction))
    # the array a record was before regression: tag, kind, point, request, audit fraction
    assert data == msgspec.msgpack.encode([kind(TYPE_STORE_RECORD), "audit", 1, wire, fraction])
    record, request = decode_record(data)
    assert record.local_value is None and request == REQUEST
    old = msgspec.msgpack.encode([kind(TYPE_STORE_RECORD), "escalated", None, wire])
    assert decode_record(old)[0] == StoreRecord("escalated", None, wire, None, None)


def test_a_regression_record_carries_the_device_value() -> None:
    record = StoreRecord("audit", 0, encode(REQUEST), 0.05, -3.25)
    decoded, request = decode_record(encode_record(record))
    assert decoded == record and decoded.local_value == -3.25 and request == REQUEST


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_non_finite_value_is_refused(value: float) -> None:
    with pytest.raises(ProtocolError, match="local value"):
        encode_record(StoreRecord("audit", 0, encode(REQUEST), 0.05, value))
    forged = msgspec.msgpack.encode([kind(TYPE_STORE_RECORD), "audit", 0, encode(REQUEST),
                                     0.05, value])
    with pytest.raises(ProtocolError):
        decode_record(forged)
