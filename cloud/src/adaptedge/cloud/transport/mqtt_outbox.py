"""QoS 1 PUBLISH packets a worker writes itself, held until the broker's PUBACK.

paho's ``publish`` builds a message, a message-info object with its own condition variable
and a queued packet per call (8 us hot), and its PUBACK handling builds a properties and a
reason-code object per acknowledgement. A worker publishes one QoS 1 reply per request; on the
fast path (``mqtt_loop.LoopDriver``) it writes them with this outbox instead: the packet
goes into the buffered socket, and stays here until its PUBACK is taken off the buffer. What is
not acknowledged when the connection is lost is sent again, flagged DUP, on the next one (as
paho does with its own). Message ids come from paho's own counter, so they never collide with
the ids of paho's SUBSCRIBEs and publishes on the same connection.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from adaptedge.cloud.transport.mqtt_framing import as_duplicate, publish_packet


class Outbox:
    """Packets written but not acknowledged, by message id; packets not yet written, in order."""

    def __init__(self, next_mid: Callable[[], int]) -> None:
        self._next_mid = next_mid
        self._unacked: dict[int, bytes] = {}
        self._unsent: deque[bytes] = deque()
        self.acked = 0
        """PUBACKs received for this outbox's packets, ever."""

    def __contains__(self, mid: int) -> bool:
        return mid in self._unacked

    def __len__(self) -> int:
        """Packets not acknowledged yet."""
        return len(self._unacked)

    @property
    def unsent(self) -> int:
        return len(self._unsent)

    def publish(self, send: Callable[[bytes], object], topic: str, payload: bytes) -> int:
        """Write a QoS 1 PUBLISH with ``send`` (or keep it for ``send_unsent`` when the socket
        is full or gone); returns its message id. ``ValueError`` for a topic or payload MQTT
        refuses."""
        mid = self._next_mid()
        packet = publish_packet(topic.encode(), payload, mid)
        self._unacked[mid] = packet
        if self._unsent:
            self._unsent.append(packet)  # behind the ones still waiting: order is kept
        else:
            try:
                send(packet)
            except OSError:  # full (BlockingIOError) or lost: written later, or resent
                self._unsent.append(packet)
        return mid

    def send_unsent(self, send: Callable[[bytes], object]) -> None:
        """Write what is waiting, in order, until the socket is full."""
        unsent = self._unsent
        while unsent:
            try:
                send(unsent[0])
            except OSError:
                return
            unsent.popleft()

    def acknowledged(self, mid: int) -> bool:
        """The broker's PUBACK for ``mid``: True if it was one of ours (now forgotten)."""
        if self._unacked.pop(mid, None) is None:
            return False
        self.acked += 1
        return True

    def reconnected(self) -> None:
        """A new connection: everything unacknowledged goes out again, flagged DUP."""
        self._unsent = deque(as_duplicate(packet) for packet in self._unacked.values())
