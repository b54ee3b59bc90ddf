"""MQTT 3.1.1 bytes written by hand for the framing and loop tests."""

from __future__ import annotations


def remaining_length(n: int) -> bytes:
    """MQTT's variable-length encoding of a packet's remaining length."""
    out = bytearray()
    while True:
        n, digit = divmod(n, 128)
        out.append(digit | (0x80 if n else 0))
        if not n:
            return bytes(out)
