"""The worker's QoS 1 outbox: written in order, held until acknowledged, resent as DUP."""

from __future__ import annotations

import itertools

import pytest

from adaptedge.cloud.transport.mqtt_framing import read_publish
from adaptedge.cloud.transport.mqtt_outbox import Outbox


class Wire:
    """A send that takes ``room`` packets, then raises as a full socket does."""

    def __init__(self, room: int = 1_000) -> None:
        self.room = room
        self.sent: list[bytes] = []

    def send(self, packet: bytes) -> int:
        if len(self.sent) >= self.room:
            raise BlockingIOError("full")
        self.sent.append(packet)
        return len(packet)


def fields(packet: bytes) -> tuple[bytes, bytes, int, bool]:
    got = read_publish(packet, 0, len(packet))
    assert got is not None
    return got.topic, got.payload, got.mid, bool(packet[0] & 0x08)


def test_published_until_acknowledged() -> None:
    ids = itertools.count(41)
    outbox, wire = Outbox(lambda: next(ids)), Wire()
    assert outbox.publish(wire.send, "a/resp", b"one") == 41
    assert outbox.publish(wire.send, "b/resp", b"two") == 42
    assert [fields(p) for p in wire.sent] == [(b"a/resp", b"one", 41, False),
                                             (b"b/resp", b"two", 42, False)]
    assert len(outbox) == 2 and 41 in outbox
    assert outbox.acknowledged(41) and not outbox.acknowledged(41)  # once
    assert not outbox.acknowledged(7)  # not ours: paho's
    assert len(outbox) == 1 and outbox.acked == 1


def test_a_full_socket_keeps_the_order() -> None:
    ids = itertools.count(1)
    outbox, wire = Outbox(lambda: next(ids)), Wire(room=1)
    for i in range(4):
        outbox.publish(wire.send, "t", f"m{i}".encode())
    assert [fields(p)[1] for p in wire.sent] == [b"m0"] and outbox.unsent == 3
    wire.room = 3
    outbox.send_unsent(wire.send)
    assert [fields(p)[1] for p in wire.sent] == [b"m0", b"m1", b"m2"] and outbox.unsent == 1
    wire.room = 10
    outbox.publish(wire.send, "t", b"m4")  # behind the one still waiting
    outbox.send_unsent(wire.send)
    assert [fields(p)[1] for p in wire.sent] == [b"m0", b"m1", b"m2", b"m3", b"m4"]


def test_a_lost_connection_sends_the_unacknowledged_again_as_duplicates() -> None:
    ids = itertools.count(1)
    outbox, wire = Outbox(lambda: next(ids)), Wire()
    for i in range(3):
        outbox.publish(wire.send, "t", f"m{i}".encode())
    outbox.acknowledged(2)
    outbox.reconnected()
    again = Wire()
    outbox.send_unsent(again.send)
    assert [fields(p) for p in again.sent] == [(b"t", b"m0", 1, True), (b"t", b"m2", 3, True)]
    assert outbox.acknowledged(1) and outbox.acknowledged(3) and len(outbox) == 0


def test_a_refused_topic_is_an_error_not_a_packet() -> None:
    outbox, wire = Outbox(lambda: 1), Wire()
    with pytest.raises(ValueError, match="wildcards"):
        outbox.publish(wire.send, "a/+/resp", b"x")
    assert wire.sent == [] and len(outbox) == 0
