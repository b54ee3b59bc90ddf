"""``ValueReply`` (a regression HPC's answer) at wire schema version 2 (issue #33): its exact
bytes, non-finite values refused at decode, version 1 messages unchanged, and a side that
speaks only version 1 refusing it in one line."""

from __future__ import annotations

import math

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import adaptedge.protocol.errors as E
from adaptedge.protocol import ProtocolError, decode, encode
from adaptedge.protocol.codec import KINDS, check_kind
from adaptedge.protocol.messages import (
    SCHEMA_VERSION,
    TYPE_REQUEST,
    TYPE_VALUE,
    VALUE_SCHEMA_VERSION,
    InferenceReply,
    ValueReply,
    kind,
)

VALUE_KIND = kind(TYPE_VALUE, VALUE_SCHEMA_VERSION)


def _fields(**overrides: object) -> list[object]:
    fields: dict[str, object] = dict(kind=VALUE_KIND, id=9, device="d", bundle="b",
                                     value=2.5, model="m", server=1.0, service=0.5)
    fields.update(overrides)
    return list(fields.values())


def test_value_reply_kind_and_exact_bytes() -> None:
    assert VALUE_KIND == 2 * 256 + 5 == KINDS[ValueReply]
    assert KINDS[InferenceReply] == kind(2, SCHEMA_VERSION) == 258
    reply = ValueReply(1, "d", "b", 1.0, "m", 0.0, 0.0)
    assert encode(reply).hex() == (
        "98" "cd0205" "01" "a164" "a162" "cb3ff0000000000000" "a16d"
        "cb0000000000000000" "cb0000000000000000")
    assert decode(encode(reply)) == reply


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_value_refused_at_decode(bad: float) -> None:
    with pytest.raises(ProtocolError) as info:
        decode(msgpack.packb(_fields(value=bad)))
    assert info.value.code == E.NON_FINITE and "value" in info.value.message


@pytest.mark.parametrize(("fields", "code"), [
    (_fields()[:-1], E.BAD_FIELD),
    ([*_fields(), 1.0], E.BAD_FIELD),
    (_fields(value="1.0"), E.BAD_FIELD),
    (_fields(value=[1.0]), E.BAD_FIELD),  # a shape, not a number
    (_fields(value=None), E.BAD_FIELD),
    (_fields(id=-1), E.BAD_FIELD),
    (_fields(device=""), E.BAD_FIELD),
    (_fields(kind=kind(TYPE_VALUE, SCHEMA_VERSION)), E.BAD_SCHEMA_VERSION),
    (_fields(kind=kind(TYPE_VALUE, 3)), E.BAD_SCHEMA_VERSION),
])
def test_malformed_value_reply_refused(fields: list[object], code: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode(msgpack.packb(fields))
    assert info.value.code == code


def test_version_1_types_at_version_2_refused() -> None:
    """Requests stay version 1: a version 2 request is not one this side reads."""
    with pytest.raises(ProtocolError) as info:
        check_kind(kind(TYPE_REQUEST, VALUE_SCHEMA_VERSION))
    assert info.value.code == E.BAD_SCHEMA_VERSION
    assert "version 2" in info.value.message and "version 1" in info.value.message


def test_version_1_only_side_refuses_value_reply_in_one_line() -> None:
    """A side built before version 2 (newest 1) refuses a ValueReply with the message every
    release before #33 gives for a version 2 message."""
    with pytest.raises(ProtocolError) as info:
        check_kind(VALUE_KIND, newest=SCHEMA_VERSION)
    assert info.value.code == E.BAD_SCHEMA_VERSION
    assert info.value.message == ("message has schema version 2; this side speaks version 1: "
                                  "upgrade the older side")
    assert "\n" not in str(info.value)
    check_kind(VALUE_KIND)  # this side speaks it
    check_kind(kind(TYPE_REQUEST), newest=SCHEMA_VERSION)


finite = st.floats(allow_nan=False, allow_infinity=False)


@given(st.builds(ValueReply, st.integers(0, 2**64 - 1), st.text(min_size=1, max_size=20),
                 st.text(min_size=1, max_size=20), finite, st.text(max_size=40), finite,
                 finite))
@settings(max_examples=200, deadline=None)
def test_property_value_round_trip(message: ValueReply) -> None:
    assert decode(encode(message)) == message
