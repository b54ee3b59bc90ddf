"""Wire codec: round trips, the schema-version rule, malformed golden bytes, non-finite values."""

from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptedge.protocol import (
    InferenceReply,
    InferenceRequest,
    ProtocolError,
    decode,
    encode,
    pack_features,
)
from adaptedge.protocol import errors as E
from adaptedge.protocol.codec import MAX_MESSAGE_BYTES, _check_envelope
from adaptedge.protocol.features import all_finite
from adaptedge.protocol.messages import SCHEMA_VERSION, Message, kind
from tests.support.message_examples import EXAMPLES


def _same(a: Message, b: Message) -> bool:
    # Telemetry may carry inf/NaN; compare with NaN == NaN.
    if hasattr(a, "counters"):
        ca, cb = a.counters, b.counters  # type: ignore[union-attr]
        if ca.keys() != cb.keys():
            return False
        for k in ca:
            x, y = ca[k], cb[k]
            if not (x == y or (math.isnan(x) and math.isnan(y))):
                return False
        return (a.source, a.sent_at) == (b.source, b.sent_at)  # type: ignore[union-attr]
    return a == b


@pytest.mark.parametrize(("name", "message"), EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_round_trip(name: str, message: Message) -> None:
    assert _same(decode(encode(message)), message)


@pytest.mark.parametrize(("name", "message"), EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_every_prefix_is_rejected(name: str, message: Message) -> None:
    data = encode(message)
    for cut in range(len(data)):
        with pytest.raises(ProtocolError):
            decode(data[:cut])


def test_request_features_and_mask_round_trip() -> None:
    values = np.array([1.5, -2.0, 3.25, 4.0, 5.0], dtype=np.float32)
    measured = np.array([True, False, True, True, False])
    features, mask = pack_features(values, measured)
    req = InferenceRequest(1, "d", "b", 0.0, 10.0, features, mask)
    back = decode(encode(req))
    assert isinstance(back, InferenceRequest)
    np.testing.assert_array_equal(back.mask_array(), measured)
    np.testing.assert_array_equal(back.feature_array(), np.where(measured, values, 0))


def test_unknown_version_names_both_versions() -> None:
    data = msgpack.packb([kind(1, SCHEMA_VERSION + 1), 1, "d", "b", 0.0, 1.0, b"\0" * 4, b"\1", -1, 0.0])
    with pytest.raises(ProtocolError) as info:
        decode(data)
    assert info.value.code == E.BAD_SCHEMA_VERSION
    assert str(SCHEMA_VERSION + 1) in info.value.message and str(SCHEMA_VERSION) in info.value.message


def _req_fields(**overrides: object) -> list[object]:
    fields: dict[str, object] = dict(
        kind=kind(1), id=1, device="d", bundle="b", sent=0.0, deadline=100.0,
        features=np.ones(3, "<f4").tobytes(), mask=b"\x07", label=-1, conf=0.0)
    fields.update(overrides)
    return list(fields.values())


MALFORMED = [
    ("not-msgpack", b"\xc1", E.DECODE_FAILED),
    ("empty", b"", E.DECODE_FAILED),
    ("a-map", msgpack.packb({"v": 1}), E.DECODE_FAILED),
    ("empty-array", msgpack.packb([]), E.DECODE_FAILED),
    ("trailing-bytes", msgpack.packb(_req_fields()) + b"\x00", E.DECODE_FAILED),
    ("ext-type", msgpack.packb([1, msgpack.ExtType(5, b"x")]), E.BAD_SCHEMA_VERSION),
    ("ext-in-field", msgpack.packb(_req_fields(device=msgpack.ExtType(5, b"x"))), E.BAD_FIELD),
    ("kind-as-string", msgpack.packb(_req_fields(kind="257")), E.BAD_TYPE),
    ("kind-as-float", msgpack.packb(_req_fields(kind=257.0)), E.BAD_TYPE),
    ("kind-as-bool", msgpack.packb([True, 1, "d"]), E.BAD_TYPE),
    ("old-version", msgpack.packb(_req_fields(kind=kind(1, 0))), E.BAD_SCHEMA_VERSION),
    ("unknown-type", msgpack.packb(_req_fields(kind=kind(99))), E.BAD_TYPE),
    ("too-few-fields", msgpack.packb(_req_fields()[:-3]), E.BAD_FIELD),
    ("too-many-fields", msgpack.packb([*_req_fields(), 1, 1]), E.BAD_FIELD),
    ("negative-id", msgpack.packb(_req_fields(id=-1)), E.BAD_FIELD),
    ("empty-device", msgpack.packb(_req_fields(device="")), E.BAD_FIELD),
    ("features-not-multiple-of-4", msgpack.packb(_req_fields(features=b"\0" * 5)), E.BAD_FEATURES),
    ("features-as-list", msgpack.packb(_req_fields(features=[1.0, 2.0])), E.BAD_FEATURES),
    ("mask-too-short", msgpack.packb(_req_fields(mask=b"")), E.BAD_FEATURES),
    ("mask-bits-beyond-end", msgpack.packb(_req_fields(mask=b"\x0f")), E.BAD_FEATURES),
    ("nan-measured", msgpack.packb(_req_fields(features=np.array([1, np.nan, 2], "<f4").tobytes())),
     E.NON_FINITE),
    ("inf-measured", msgpack.packb(_req_fields(features=np.array([np.inf, 0, 2], "<f4").tobytes())),
     E.NON_FINITE),
    ("zero-deadline", msgpack.packb(_req_fields(deadline=0.0)), E.BAD_FIELD),
    ("nan-deadline", msgpack.packb(_req_fields(deadline=float("nan"))), E.BAD_FIELD),
    ("label-out-of-range", msgpack.packb(_req_fields(label=-2)), E.BAD_FIELD),
    ("reply-label-beyond-classes",
     msgpack.packb([kind(2), 1, "d", "b", 5, np.ones(2, "<f4").tobytes(), "m", 0.0, 0.0]), E.BAD_FIELD),
    ("reply-nan-probability",
     msgpack.packb([kind(2), 1, "d", "b", 0, np.array([np.nan, 1], "<f4").tobytes(), "m", 0.0, 0.0]),
     E.NON_FINITE),
    ("telemetry-string-counter", msgpack.packb([kind(4), "d", 0.0, {"x": "y"}]), E.BAD_FIELD),
    ("telemetry-int-key", msgpack.packb([kind(4), "d", 0.0, {1: 2}]), E.DECODE_FAILED),
    ("error-inf-time", msgpack.packb([kind(3), None, "d", "c", "m", float("inf")]), E.BAD_FIELD),
    ("inf-sent-at", msgpack.packb(_req_fields(sent=float("-inf"))), E.BAD_FIELD),
    ("nan-confidence", msgpack.packb(_req_fields(conf=float("nan"))), E.BAD_FIELD),
    ("inf-size", msgpack.packb([*_req_fields(), float("inf")]), E.BAD_FIELD),
    ("mask-too-long", msgpack.packb(_req_fields(mask=b"\x07\x00")), E.BAD_FEATURES),
    ("reply-inf-service-ms",
     msgpack.packb([kind(2), 1, "d", "b", 0, np.ones(2, "<f4").tobytes(), "m", 0.0, float("inf")]),
     E.BAD_FIELD),
    ("bool-request-id", msgpack.packb(_req_fields(id=True)), E.BAD_FIELD),
    ("float-label", msgpack.packb(_req_fields(label=1.0)), E.BAD_FIELD),
    ("invalid-utf8-device", msgpack.packb(_req_fields(device=b"\xff")), E.BAD_FIELD),
    ("too-large", b"\x00" * (MAX_MESSAGE_BYTES + 1), E.TOO_LARGE),
]


@pytest.mark.parametrize(("name", "data", "code"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_golden_bytes(name: str, data: bytes, code: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode(data)
    assert info.value.code == code
    assert isinstance(info.value, ValueError)


def test_fast_layout_check_agrees_with_the_diagnosing_path() -> None:
    # decode's one-lookup layout check (whole float32 values, one mask bit per feature, clear
    # padding) accepts exactly what the field-by-field diagnosing checks accept.
    for nbytes in range(1, 70):
        for mask_len in range(0, 4):
            for last in (0, 1, 3, 0x7F, 0x80, 0xFF):
                mask = bytes(mask_len - 1) + bytes([last]) if mask_len else b""
                data = msgpack.packb(_req_fields(features=b"\0" * nbytes, mask=mask))
                try:
                    _check_envelope(msgpack.unpackb(data))
                    expected = True
                except ProtocolError:
                    expected = False
                try:
                    decode(data)
                    accepted = True
                except ProtocolError:
                    accepted = False
                assert accepted == expected, (nbytes, mask.hex())


def test_nan_in_unmeasured_slot_is_accepted() -> None:
    features = np.array([1, np.nan, 2], "<f4").tobytes()
    msg = decode(msgpack.packb(_req_fields(features=features, mask=b"\x05")))
    assert isinstance(msg, InferenceRequest)
    assert msg.mask_array().tolist() == [True, False, True]


def test_non_finite_values_are_an_answer_not_a_warning() -> None:
    """NaN, and +inf beside -inf (whose sum is NaN), are found without numpy warning: the
    suite turns warnings into errors, a worker would print one per hostile batch."""
    for values in ([np.inf, -np.inf, 1.0], [1.0, np.nan], [3e38, -3e38]):
        assert all_finite(np.array(values, "<f4").tobytes()) is all(map(math.isfinite, values))
    probabilities = np.array([np.inf, -np.inf], "<f4").tobytes()
    with pytest.raises(ProtocolError) as err:
        decode(encode(InferenceReply(1, "dev", "b", 0, np.array([0.5, 0.5], "<f4").tobytes(),
                                     "m", 0.0, 0.0)).replace(
            np.array([0.5, 0.5], "<f4").tobytes(), probabilities))
    assert err.value.code == E.NON_FINITE


def test_trailing_defaults_may_be_omitted() -> None:
    msg = decode(msgpack.packb(_req_fields()[:-2]))
    assert isinstance(msg, InferenceRequest)
    assert (msg.local_label, msg.local_confidence) == (-1, 0.0)


def test_encode_rejects_unencodable_values() -> None:
    bad = InferenceRequest(1, "d", "b", 0.0, 1.0, b"\0" * 4, b"\1", local_label=object())  # type: ignore[arg-type]
    with pytest.raises(ProtocolError):
        encode(bad)


def test_exact_bytes_of_schema_version_1() -> None:
    req = InferenceRequest(1, "d", "b", 0.0, 1.0, b"\0\0\x80\x3f", b"\x01", -1, 0.0)
    assert encode(req).hex() == (
        "9a" "cd0101" "01" "a164" "a162" "cb0000000000000000" "cb3ff0000000000000"
        "c4040000803f" "c40101" "ff" "cb0000000000000000"
    )
    reply = InferenceReply(1, "d", "b", 0, b"\0\0\x80\x3f", "m", 0.0, 0.0)
    assert encode(reply).hex().startswith("99" "cd0102" "01")


finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
ident = st.text(min_size=1, max_size=20)


@st.composite
def requests(draw: st.DrawFn) -> InferenceRequest:
    n = draw(st.integers(1, 64))
    values = np.array(draw(st.lists(finite32, min_size=n, max_size=n)), dtype=np.float32)
    measured = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    features, mask = pack_features(values, measured)
    return InferenceRequest(
        draw(st.integers(0, 2**64 - 1)), draw(ident), draw(ident),
        draw(st.floats(0, 4e9)), draw(st.floats(0.001, 1e6)), features, mask,
        draw(st.integers(-1, 4095)), draw(st.floats(0, 1)))


@pytest.mark.slow
@given(requests())
@settings(max_examples=100, deadline=None)
def test_property_request_round_trip(message: InferenceRequest) -> None:
    assert decode(encode(message)) == message


@pytest.mark.parametrize("n", [1, 7, 8, 9, 64])
def test_request_round_trip_at_the_extremes(n: int) -> None:
    """The bounds the random requests above reach only by chance: every field at its
    smallest and largest, float32 extremes (subnormal, -0.0, the largest finite) in the
    features, and masks all set, alternating and empty."""
    info = np.finfo(np.float32)
    values = np.resize(np.array([info.max, -info.max, info.smallest_subnormal, -0.0, 0.0,
                                 info.tiny, 1.0], dtype=np.float32), n)
    for measured in (np.ones(n, bool), np.arange(n) % 2 == 0, np.zeros(n, bool)):
        features, mask = pack_features(values, measured)
        for rid, label, text in ((0, -1, "d"), (2**64 - 1, 4095, "x" * 20)):
            message = InferenceRequest(rid, text, text, 4e9, 0.001, features, mask, label, 1.0)
            assert decode(encode(message)) == message


@given(st.builds(
    lambda rid, dev, code, text, t: __import__("adaptedge.protocol", fromlist=["ErrorReply"]).ErrorReply(rid, dev, code, text, t),
    st.none() | st.integers(0, 2**64 - 1), ident, ident, st.text(max_size=100),
    st.floats(allow_nan=False, allow_infinity=False)))
@settings(max_examples=200, deadline=None)
def test_property_error_round_trip(message: Message) -> None:
    assert decode(encode(message)) == message
