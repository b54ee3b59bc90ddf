"""A worker's paho network loop driven by hand: one ``poll`` per pass, reads and writes in bursts.

paho's ``loop()`` creates a socketpair that wakes its ``select`` when another thread
publishes; from then on every publish (each reply, each PUBACK) writes a byte to it and every
pass reads it back. A worker that owns its client in one thread needs none of that:
``LoopDriver`` drives paho through its external-loop API (``loop_read``, ``loop_write``,
``loop_misc``, ``want_write``), so no socketpair is made, waits with one registered ``poll``
object, and puts a ``mqtt_socket.BufferedSocket`` under paho, so a burst of requests is one
``recv`` and the batch's replies and PUBACKs leave in one ``send``.

The fast path (``LoopDriver.deliver``): per message paho builds a message object and queues a
PUBACK packet, per publish a message and a message-info object with its own condition
variable, per acknowledgement a properties and a reason-code object: 30 of a lone request's
~60 us, hot. With ``deliver`` set, well-formed QoS 0/1 PUBLISH packets at the front of the
buffer are parsed here (``mqtt_framing``) and handed to it; their PUBACKs are held until
what is queued before them is written (the replies) and ``acks_due()`` says the worker has
answered what it received. ``publish`` writes QoS 1 packets through ``mqtt_outbox.Outbox``,
whose PUBACKs are taken here too. Every other packet (SUBACKs, PINGRESPs, acks of paho's own
publishes, QoS 2, malformed packets) goes to paho, whole and one at a time.

Only for a client driven from one thread: a client published to from other threads must keep
paho's ``loop_start``/``loop_forever``.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable
from typing import Any, Final

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

from adaptedge.cloud.transport.mqtt_framing import Publish, puback, read_puback, read_publish
from adaptedge.cloud.transport.mqtt_outbox import Outbox
from adaptedge.cloud.transport.mqtt_socket import BufferedSocket

_SUCCESS: Final = MQTTErrorCode.MQTT_ERR_SUCCESS
_MAX_HANDOVERS: Final = 10_000  # packets handed to paho one by one in one pass, at most
_READ_EVENTS: Final = select.POLLIN | select.POLLERR | select.POLLHUP | select.POLLNVAL
Deliver = Callable[[Publish, float], None]
"""The fast path's receiver: a PUBLISH and the monotonic time it was read."""


def _always() -> bool:
    return True


class LoopDriver:
    """``step(timeout_s)`` is one pass of ``client.loop(timeout_s)``, for one worker thread:
    hand queued packets to the socket, wait for input, read it, keep the connection alive.

    ``deliver`` (``None``: off) turns on the fast path for a buffered socket: QoS 0/1 PUBLISH
    packets go to it instead of paho's ``on_message``/``message_callback_add`` callbacks (set
    it once those are no longer needed), and their PUBACKs leave once ``acks_due()``. With it
    on, ``publish`` writes QoS 1 packets through ``outbox`` and takes their PUBACKs itself."""

    def __init__(self, client: mqtt.Client, *, buffered: bool = True,
                 acks_due: Callable[[], bool] = _always) -> None:
        self.client = client
        self.buffered = buffered
        self.deliver: Deliver | None = None
        self.acks_due = acks_due
        self._acks: list[int] = []
        # paho's own message-id counter (private; paho has no public one), so the outbox's
        # ids never collide with paho's SUBSCRIBE and publish ids on the same connection.
        self.outbox = Outbox(client._mid_generate)
        self._taking = False
        self._sock: Any = None
        self._wait = select.poll()
        self._peek = select.poll()
        self._wait_mask = 0

    def step(self, timeout_s: float) -> MQTTErrorCode:
        client = self.client
        sock = self._current()
        if sock is None:
            return MQTTErrorCode.MQTT_ERR_NO_CONN
        if (rc := self._write()) != _SUCCESS:
            return rc
        readable = _pending(sock) > 0
        if not readable:
            mask = select.POLLIN | (select.POLLOUT if self._wants_write(sock) else 0)
            if mask != self._wait_mask:
                self._wait.modify(sock, mask)
                self._wait_mask = mask
            try:
                events = self._wait.poll(timeout_s * 1000.0)
            except (OSError, ValueError, TypeError):  # closed under us: loop_read reports it
                events = [(0, select.POLLNVAL)]
            readable = bool(events) and bool(events[0][1] & _READ_EVENTS)
        if readable:
            deliver = self.deliver
            rc = client.loop_read() if deliver is None or type(sock) is not BufferedSocket \
                else self._read_fast(sock, deliver)
            if rc != _SUCCESS or client.socket() is None:
                return rc
        if (rc := self._write()) != _SUCCESS:
            return rc
        return client.loop_misc()

    def publish(self, topic: str, payload: bytes) -> bool:
        """A QoS 1 publish through the outbox; False when the fast path is off (no ``deliver``
        or not a buffered socket): then publish with paho. ``ValueError`` as paho's."""
        sock = self._current()
        if self.deliver is None or type(sock) is not BufferedSocket:
            return False
        self.outbox.publish(sock.send, topic, payload)
        return True

    def readable(self) -> bool:
        """More input already waiting (buffered, or on the socket; only buffered while the fast
        path takes packets, as the socket was just read): then keep batching."""
        sock = self._current()
        if sock is None:
            return False
        if _pending(sock) > 0:
            return True
        if self._taking:
            return False
        try:
            return bool(self._peek.poll(0))
        except (OSError, ValueError, TypeError):
            return False

    def _read_fast(self, sock: BufferedSocket, deliver: Deliver) -> MQTTErrorCode:
        """Read with the fast path: PUBLISH packets to ``deliver``, each other packet to paho
        on its own (so the PUBLISH packets behind it still take the fast path)."""
        client, read = self.client, True
        for _ in range(_MAX_HANDOVERS):
            self._take(sock, deliver, read)
            read = False  # once a pass; what arrives meanwhile wakes the next poll at once
            if sock.drained:
                return _SUCCESS  # paho would only hear "try again"
            if not sock.hand_over_one():  # end of stream or a read error: paho reports it
                return client.loop_read()
            try:
                rc = client.loop_read()
            finally:
                sock.hand_over_all()
            if rc != _SUCCESS or client.socket() is None:
                return rc
        return _SUCCESS

    def _take(self, sock: BufferedSocket, deliver: Deliver, read: bool) -> None:
        """Deliver the PUBLISH packets at the front of the buffer, reading the socket first if
        ``read`` and nothing is held. While taking, ``readable()`` asks only the buffer: the
        socket was just read."""
        acks, outbox = self._acks, self.outbox
        self._taking = True
        try:
            while True:
                packet = sock.take(read_publish, read=read)
                read = False
                if packet is not None:
                    deliver(packet, time.monotonic())
                    if packet.qos:
                        acks.append(packet.mid)
                    continue
                if sock.drained or not sock.holds_packet():
                    return  # nothing more, or end of stream / a read error for paho to see
                mid = sock.take(self._own_puback, read=False)
                if mid is None:
                    return  # a packet for paho
                outbox.acknowledged(mid)
        finally:
            self._taking = False

    def _own_puback(self, data: bytes, at: int, end: int) -> int | None:
        mid = read_puback(data, at, end)
        return mid if mid is not None and mid in self.outbox else None

    def _write(self) -> MQTTErrorCode:
        """Hand paho's queued packets to the socket, then the outbox's waiting ones, then the
        PUBACKs that are due; flush a ``BufferedSocket``."""
        client = self.client
        if client.want_write() and (rc := client.loop_write()) != _SUCCESS:
            return rc
        sock = client.socket()
        if type(sock) is BufferedSocket:
            outbox = self.outbox
            if outbox.unsent:
                outbox.send_unsent(sock.send)
            if self._acks and not outbox.unsent and not client.want_write() \
                    and self.acks_due():
                self._send_acks(sock)
            sock.flush()
        return _SUCCESS

    def _send_acks(self, sock: BufferedSocket) -> None:
        try:
            sock.send(b"".join(map(puback, self._acks)))
        except BlockingIOError:
            return  # the socket is full: they leave on a later pass
        except OSError:
            pass  # the connection is lost: paho reports it on the next read
        self._acks.clear()

    def _wants_write(self, sock: Any) -> bool:
        return self.client.want_write() or (type(sock) is BufferedSocket and sock.unsent > 0)

    def _current(self) -> Any:
        """The client's socket; a new connection's is wrapped and registered on first sight."""
        sock = self.client.socket()
        if sock is self._sock or sock is None:
            return sock
        if self.buffered and type(sock) is socket.socket:
            sock = BufferedSocket(sock)
            self.client._sock = sock  # paho has no public hook to wrap its socket
        self._sock = sock
        self._acks.clear()  # they were for the lost connection's messages
        self.outbox.reconnected()
        self._wait, self._peek = select.poll(), select.poll()
        self._wait.register(sock, select.POLLIN)
        self._peek.register(sock, select.POLLIN)
        self._wait_mask = select.POLLIN
        return sock


def _pending(sock: Any) -> int:
    """Bytes already read from the network but not handed to paho (TLS or our buffer)."""
    pending = getattr(sock, "pending", None)
    try:
        return int(pending()) if pending is not None else 0
    except (OSError, ValueError):
        return 0
