"""Message loss on an MQTT byte stream: drop whole QoS 0 PUBLISH packets, seeded.

TCP never loses bytes; what a lossy radio link costs an MQTT client is messages that never
arrive (a QoS 0 publish dropped with a connection, a link that stalls). ``PublishDropper``
cuts a byte stream into MQTT control packets (fixed header + remaining length) and drops each
QoS 0 PUBLISH with probability ``loss``, so the stream stays valid and everything else (QoS 1
publishes, acknowledgements, pings) goes through untouched. The simulator's ``network.loss``
means the same: a message lost with that probability.
"""

from __future__ import annotations

import random

_PUBLISH = 3


class PublishDropper:
    """Feed it one direction's bytes in order; it returns what to forward."""

    def __init__(self, loss: float, rng: random.Random) -> None:
        if not 0.0 <= loss <= 1.0:
            raise ValueError(f"loss must be a probability in [0, 1], got {loss}")
        self.loss = loss
        self._rng = rng
        self._buf = bytearray()
        self.dropped = 0
        self.passed = 0  # QoS 0 publishes forwarded (``dropped + passed``: all of them)

    def feed(self, data: bytes) -> bytes:
        self._buf += data
        out = bytearray()
        while True:
            size = _packet_size(self._buf)
            if size is None or len(self._buf) < size:
                return bytes(out)
            first = self._buf[0]
            if first >> 4 == _PUBLISH and (first >> 1) & 3 == 0:  # QoS 0: may be lost
                if self._rng.random() < self.loss:
                    self.dropped += 1
                    del self._buf[:size]
                    continue
                self.passed += 1
            out += self._buf[:size]
            del self._buf[:size]


def _packet_size(buf: bytearray) -> int | None:
    """Total size of the packet at the start of ``buf``, or None while its header is partial."""
    remaining, shift = 0, 0
    for i in range(1, min(len(buf), 5)):
        byte = buf[i]
        remaining |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return 1 + i + remaining
        shift += 7
    if len(buf) >= 5:
        raise ValueError("malformed MQTT remaining length (more than 4 bytes)")
    return None
