"""A worker's paho network loop driven by hand: one ``poll`` per pass, reads and writes in bursts.

paho's ``loop()`` creates a socketpair that wakes its ``select`` when another thread
publishes; from then on every publish (each reply, each PUBACK) writes a byte to it and every
pass reads it back. It also reads each packet in ~3 ``recv`` calls (type byte, length, body)
and writes each packet with its own ``send``. A worker that owns its client in one thread
needs none of that: ``LoopDriver`` drives paho through its external-loop API (``loop_read``,
``loop_write``, ``loop_misc``, ``want_write``), so no socketpair is made, waits with one
registered ``poll`` object, and puts a ``BufferedSocket`` under paho, so a burst of requests
is one ``recv`` and the batch's replies and PUBACKs leave in one ``send``.

The fast path (``LoopDriver.deliver``): paho builds a message object, a properties object and
a queued PUBACK packet per PUBLISH (about 13 us of a lone request's 60 us, hot). With a
``deliver`` callback set, well-formed QoS 0/1 PUBLISH packets at the front of the buffer are
parsed here (``mqtt_framing``) and handed to it; their PUBACKs are held until paho has
written everything queued (the replies) and ``acks_due()`` says the worker has answered what
it received, then written together. Everything else (acks of our own publishes, SUBACKs,
PINGRESPs, QoS 2, malformed packets) goes to paho as whole packets.

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

from adaptedge.cloud.mqtt_framing import Publish, complete_end, packet_end, puback, read_publish

_SUCCESS: Final = MQTTErrorCode.MQTT_ERR_SUCCESS
_READ_CHUNK: Final = 65_536
_WRITE_LIMIT: Final = 1 << 20
_MAX_HANDOVERS: Final = 10_000  # packets handed to paho one by one in one pass, at most
_READ_EVENTS: Final = select.POLLIN | select.POLLERR | select.POLLHUP | select.POLLNVAL
Deliver = Callable[[Publish, float], None]
"""The fast path's receiver: a PUBLISH and the monotonic time it was read."""


def _always() -> bool:
    return True


class BufferedSocket:
    """A connected, non-blocking TCP socket with reads and writes gathered into bursts.

    Reads: paho reads each packet in pieces (``recv(1)`` for the type, ``recv(1)`` per length
    byte, ``recv(n)`` for the body); they are served from one ``recv`` of up to 64 KiB (more
    while a large packet is arriving). paho is only ever given whole packets: a packet still
    arriving stays here and ``recv`` says "try again", so between reads paho is always at a
    packet boundary and ``take_publish`` may take the next packet itself. ``pending()`` reports
    the whole packets held (the hook paho already honours for TLS sockets).
    Writes: ``send`` appends to a buffer that ``flush`` writes with one ``send``. Past
    ``_WRITE_LIMIT`` buffered bytes ``send`` raises ``BlockingIOError`` and paho keeps the
    packet queued. A failed read or flush keeps its error for the next ``recv``, where paho
    handles a lost connection as usual.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.raw = sock
        self.fileno = sock.fileno
        self._data = b""
        self._at = 0
        self._whole = 0  # end of the last whole packet in _data
        self._limit: int | None = None  # paho may read up to here (``hand_over_one``)
        self._out = bytearray()
        self._error: OSError | None = None
        self.drained = False
        """``take_publish`` found nothing more to read (no whole packet held or arrived)."""

    def recv(self, size: int) -> bytes:
        at, limit = self._at, self._limit
        if limit is not None:
            if at >= limit:
                raise BlockingIOError("paho was handed one packet: it has had it")
        elif at >= self._whole and not self._fill():
            return b""  # end of stream, as from the socket itself
        data, at = self._data, self._at
        end = min(at + size, self._whole if limit is None else limit)
        self._at = end
        return data[at:end]

    def hand_over_one(self) -> bool:
        """Let paho's next read see only the whole packet at the front (until
        ``hand_over_all``); False when no whole packet is held."""
        if self._at >= self._whole:
            return False
        self._limit = packet_end(self._data, self._at)
        return True

    def hand_over_all(self) -> None:
        self._limit = None

    def take_publish(self, *, read: bool = True) -> Publish | None:
        """The next packet, taken, if it is a well-formed QoS 0/1 PUBLISH; else ``None`` and
        it stays for paho (so does end of stream, and a read error for the next ``recv``).
        ``read=False``: only from what is held (no system call)."""
        self.drained = False
        if self._at >= self._whole:
            if not read:
                self.drained = True
                return None
            try:
                if not self._fill():
                    return None
            except BlockingIOError:
                self.drained = True
                return None
            except OSError as exc:
                self._error = exc
                return None
        data, at = self._data, self._at
        end = packet_end(data, at)
        packet = read_publish(data, at, end)
        if packet is not None:
            self._at = end
        return packet

    def _fill(self) -> bool:
        """Read until at least one whole packet is held; False at end of stream,
        ``BlockingIOError`` when none is whole yet."""
        if self._error is not None:
            raise self._error
        tail = self._data[self._at:]  # part of a packet still arriving
        # Reading at least as much as is held keeps a large packet's copying linear.
        chunk = self.raw.recv(max(_READ_CHUNK, len(tail)))
        if not chunk:
            return False
        data = tail + chunk if tail else chunk
        self._data, self._at = data, 0
        self._whole = complete_end(data, 0)
        if not self._whole:
            raise BlockingIOError("no whole packet has arrived yet")
        return True

    def pending(self) -> int:
        """Bytes of whole packets read but not handed out yet (1 after a failed read or flush:
        paho must read it)."""
        return self._whole - self._at or int(self._error is not None)

    def send(self, data: bytes | bytearray) -> int:
        if self._error is not None:
            raise self._error
        if len(self._out) >= _WRITE_LIMIT and self.flush() >= _WRITE_LIMIT:
            raise BlockingIOError("the socket takes no more data now")
        self._out += data
        return len(data)

    @property
    def unsent(self) -> int:
        return len(self._out)

    def flush(self) -> int:
        """Write what the socket takes now; returns the bytes still buffered."""
        out = self._out
        while out and self._error is None:
            try:
                del out[:self.raw.send(out)]
            except BlockingIOError:
                break
            except OSError as exc:
                self._error = exc
                out.clear()
        return len(out)

    def close(self) -> None:
        self.flush()  # paho closes right after handing over its DISCONNECT
        self._data, self._at, self._whole = b"", 0, 0
        self.raw.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class LoopDriver:
    """``step(timeout_s)`` is one pass of ``client.loop(timeout_s)``, for one worker thread:
    hand queued packets to the socket, wait for input, read it, keep the connection alive.

    ``deliver`` (``None``: off) turns on the fast path for a buffered socket: QoS 0/1 PUBLISH
    packets go to it instead of paho's ``on_message``/``message_callback_add`` callbacks (set
    it once those are no longer needed), and their PUBACKs leave once ``acks_due()``."""

    def __init__(self, client: mqtt.Client, *, buffered: bool = True,
                 acks_due: Callable[[], bool] = _always) -> None:
        self.client = client
        self.buffered = buffered
        self.deliver: Deliver | None = None
        self.acks_due = acks_due
        self._acks: list[int] = []
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
        acks = self._acks
        self._taking = True
        try:
            while (packet := sock.take_publish(read=read)) is not None:
                deliver(packet, time.monotonic())
                if packet.qos:
                    acks.append(packet.mid)
                read = False
        finally:
            self._taking = False

    def _write(self) -> MQTTErrorCode:
        """Hand paho's queued packets to the socket, then the PUBACKs that are due; flush a
        ``BufferedSocket``."""
        client = self.client
        if client.want_write() and (rc := client.loop_write()) != _SUCCESS:
            return rc
        sock = client.socket()
        if type(sock) is BufferedSocket:
            if self._acks and not client.want_write() and self.acks_due():
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
