"""MQTT 3.1.1 framing read off the bytes, checked against paho's own PUBLISH decoder."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from paho.mqtt import _packet as paho_packet
from paho.mqtt.client import MQTTv311

from adaptedge.cloud.transport.mqtt_framing import complete_end, packet_end, puback, read_publish
from tests.support.mqtt_bytes import remaining_length


def publish_packet(topic: bytes, payload: bytes, qos: int, *, mid: int = 7, retain: bool = False,
                   dup: bool = False) -> bytes:
    body = struct.pack("!H", len(topic)) + topic + (struct.pack("!H", mid) if qos else b"") \
        + payload
    header = 0x30 | (0x08 if dup else 0) | (qos << 1) | int(retain)
    return bytes([header]) + remaining_length(len(body)) + body


def test_packet_end_waits_for_the_whole_packet() -> None:
    packet = publish_packet(b"a/v1/d/req", b"x" * 300, 1)  # a two-byte remaining length
    assert packet[2] == 0x02 and packet[1] & 0x80
    for cut in range(len(packet)):
        assert packet_end(packet[:cut], 0) == -1
    assert packet_end(packet, 0) == len(packet)
    assert packet_end(b"junk" + packet + b"\x40", 4) == 4 + len(packet)


def test_a_length_of_more_than_four_bytes_is_malformed() -> None:
    assert packet_end(b"\x30\xff\xff\xff\x7f", 0) == -1  # the largest legal length: not here yet
    assert packet_end(b"\x30\xff\xff\xff\xff\x01", 0) == -2
    # Everything is handed over then, so paho reads it and refuses it as it would alone.
    assert complete_end(b"\x40\x02\x00\x01\x30\xff\xff\xff\xff\x01", 0) == 10


def test_complete_end_stops_before_a_packet_still_arriving() -> None:
    first = publish_packet(b"t", b"one", 1)
    ack = puback(9)
    partial = publish_packet(b"t", b"two", 0)[:-1]
    data = first + ack + partial
    assert complete_end(data, 0) == len(first) + len(ack)
    assert complete_end(data, len(first)) == len(first) + len(ack)
    assert complete_end(b"", 0) == 0
    assert complete_end(b"\x30", 0) == 0


@pytest.mark.parametrize("qos", [0, 1])
def test_read_publish_agrees_with_paho(qos: int) -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        topic = bytes(rng.integers(33, 127, size=int(rng.integers(1, 40)), dtype=np.uint8))
        payload = rng.bytes(int(rng.integers(0, 400)))
        retain, dup = bool(rng.integers(2)), bool(rng.integers(2))
        mid = int(rng.integers(1, 65536))
        packet = b"\x40\x02\x00\x01" + publish_packet(topic, payload, qos, mid=mid, retain=retain,
                                                      dup=dup)
        assert packet_end(packet, 4) == len(packet)
        ours = read_publish(packet, 4, len(packet))
        assert ours is not None
        theirs = paho_packet.decode_publish(packet[4], _body(packet[4:]), MQTTv311)
        assert (ours.topic, ours.payload, ours.qos, ours.retain) == \
            (theirs.topic, theirs.payload, theirs.qos, theirs.retain)
        assert ours.mid == (theirs.mid if qos else 0)


def _body(packet: bytes) -> bytes:
    """Everything after the fixed header (what paho's decoder takes)."""
    i = 1
    while packet[i] & 0x80:
        i += 1
    return packet[i + 1:]


def test_read_publish_leaves_everything_else_to_paho() -> None:
    assert read_publish(puback(3), 0, 4) is None  # not a PUBLISH
    qos2 = publish_packet(b"t", b"p", 2)
    assert read_publish(qos2, 0, len(qos2)) is None  # QoS 2 has a handshake paho keeps
    empty_topic = publish_packet(b"", b"p", 1)
    assert read_publish(empty_topic, 0, len(empty_topic)) is None  # malformed in 3.1.1
    short = b"\x32\x04\x00\x09ab"  # topic length past the packet's end
    assert read_publish(short, 0, len(short)) is None
    no_mid = b"\x32\x03\x00\x01t"  # QoS 1 without room for its message id
    assert read_publish(no_mid, 0, len(no_mid)) is None


def test_puback_bytes() -> None:
    assert puback(1) == b"\x40\x02\x00\x01"
    assert puback(0x1234) == b"\x40\x02\x12\x34"


def test_publish_packet_is_what_paho_decodes() -> None:
    from adaptedge.cloud.transport.mqtt_framing import as_duplicate, publish_packet, read_puback

    for size in (0, 1, 127, 128, 16_383, 16_384, 70_000):  # one to three length bytes
        payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
        packet = publish_packet(b"adaptedge/v1/dev1/resp", payload, 0xBEEF)
        assert packet_end(packet, 0) == len(packet)
        theirs = paho_packet.decode_publish(packet[0], _body(packet), MQTTv311)
        assert (theirs.topic, theirs.payload, theirs.qos, theirs.mid, theirs.retain,
                theirs.dup) == (b"adaptedge/v1/dev1/resp", payload, 1, 0xBEEF, False, False)
        again = as_duplicate(packet)
        assert paho_packet.decode_publish(again[0], _body(again), MQTTv311).dup
        assert again[1:] == packet[1:]
    assert read_puback(puback(0xBEEF), 0, 4) == 0xBEEF
    assert read_puback(b"\x50\x02\x00\x01", 0, 4) is None  # a PUBREC


@pytest.mark.parametrize("topic", [b"", b"a/+/b", b"a/#", b"x" * 65_536])
def test_publish_packet_refuses_what_paho_refuses(topic: bytes) -> None:
    from adaptedge.cloud.transport.mqtt_framing import publish_packet

    with pytest.raises(ValueError, match="cannot publish on topic"):
        publish_packet(topic, b"p", 1)
