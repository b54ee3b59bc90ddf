"""MQTT 3.1.1 framing read straight off the bytes: where packets end, and what a PUBLISH holds.

``BufferedSocket`` uses it to hand paho whole packets only, and the worker's fast path uses
``read_publish`` to take a well-formed QoS 0/1 PUBLISH without paho's per-packet objects,
``publish_packet`` to write its QoS 1 replies and ``read_puback`` to take their PUBACKs.
Anything else (other packet types, QoS 2, a malformed PUBLISH) is left for paho to handle,
or to refuse, exactly as it would on its own.
"""

from __future__ import annotations

from typing import Final, NamedTuple

PUBLISH: Final = 0x30
_DUP: Final = 0x08
_MAX_LENGTH_BYTES: Final = 4
_MAX_REMAINING: Final = 268_435_455
PUBACK_HEAD: Final = b"\x40\x02"


class Publish(NamedTuple):
    """A PUBLISH from the broker: topic as raw bytes (paho decodes it the same way)."""

    topic: bytes
    payload: bytes
    qos: int
    retain: bool
    mid: int


def packet_end(data: bytes, at: int) -> int:
    """Offset just past the packet that starts at ``at``; -1 when it is not all there yet,
    -2 when its remaining-length field is malformed (more than four bytes)."""
    i, length, shift, size = at + 1, 0, 0, len(data)
    while True:
        if i >= size:
            return -1
        byte = data[i]
        i += 1
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if i - at > _MAX_LENGTH_BYTES:
            return -2
    end = i + length
    return end if end <= size else -1


def complete_end(data: bytes, at: int) -> int:
    """Offset just past the last whole packet from ``at`` on (``at`` if none is whole yet).
    A malformed length makes everything "whole": paho then reads it and refuses it."""
    size = len(data)
    while at < size:
        end = packet_end(data, at)
        if end == -2:
            return size
        if end < 0:
            return at
        at = end
    return at


def read_publish(data: bytes, at: int, end: int) -> Publish | None:
    """The QoS 0/1 PUBLISH in ``data[at:end]`` (a whole packet); ``None`` for any other packet
    or a malformed one (paho handles those)."""
    header = data[at]
    qos = (header >> 1) & 0x03
    if header & 0xF0 != PUBLISH or qos > 1:
        return None
    i = at + 1
    while data[i] & 0x80:
        i += 1
    i += 1  # past the remaining length
    if i + 2 > end:
        return None
    topic_end = i + 2 + ((data[i] << 8) | data[i + 1])
    if topic_end == i + 2 or topic_end + 2 * qos > end:
        return None  # MQTT 3.1.1: a topic is never empty
    mid = 0
    if qos:
        mid = (data[topic_end] << 8) | data[topic_end + 1]
    return Publish(data[i + 2:topic_end], data[topic_end + 2 * qos:end], qos,
                   bool(header & 0x01), mid)


def puback(mid: int) -> bytes:
    """The PUBACK packet for message id ``mid``."""
    return PUBACK_HEAD + mid.to_bytes(2, "big")


def read_puback(data: bytes, at: int, end: int) -> int | None:
    """The message id of the PUBACK in ``data[at:end]`` (a whole packet); ``None`` for any
    other packet."""
    if end - at != 4 or data[at] != 0x40 or data[at + 1] != 0x02:
        return None
    return (data[at + 2] << 8) | data[at + 3]


def publish_packet(topic: bytes, payload: bytes, mid: int) -> bytes:
    """A QoS 1 PUBLISH (not retained, not a duplicate); ``ValueError`` for a topic paho's
    ``publish`` would refuse (empty, wildcards) or a packet past MQTT's size limit."""
    if not topic or b"+" in topic or b"#" in topic or len(topic) > 0xFFFF:
        raise ValueError(f"cannot publish on topic {topic!r}: it must be 1 to 65535 bytes "
                         "without the wildcards + and #")
    length = 2 + len(topic) + 2 + len(payload)
    if length > _MAX_REMAINING:
        raise ValueError(f"a {len(payload)}-byte payload is past MQTT's packet size limit")
    header = bytearray(b"\x32")
    while True:
        length, digit = divmod(length, 128)
        header.append(digit | (0x80 if length else 0))
        if not length:
            break
    return b"".join((header, len(topic).to_bytes(2, "big"), topic, mid.to_bytes(2, "big"),
                     payload))


def as_duplicate(packet: bytes) -> bytes:
    """The same PUBLISH with its DUP flag set (sent again after a reconnection)."""
    return bytes([packet[0] | _DUP]) + packet[1:]
