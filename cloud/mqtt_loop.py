"""A worker's paho network loop driven by hand: one ``poll`` per pass, reads and writes in bursts.

paho's ``loop()`` creates a socketpair that wakes its ``select`` when another thread
publishes; from then on every publish (each reply, each PUBACK) writes a byte to it and every
pass reads it back. It also reads each packet in ~3 ``recv`` calls (type byte, length, body)
and writes each packet with its own ``send``. A worker that owns its client in one thread
needs none of that: ``LoopDriver`` drives paho through its external-loop API (``loop_read``,
``loop_write``, ``loop_misc``, ``want_write``), so no socketpair is made, waits with one
registered ``poll`` object, and puts a ``BufferedSocket`` under paho, so a burst of requests
is one ``recv`` and the batch's replies and PUBACKs leave in one ``send``.

Only for a client driven from one thread: a client published to from other threads must keep
paho's ``loop_start``/``loop_forever``.
"""

from __future__ import annotations

import select
import socket
from typing import Any, Final

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

_SUCCESS: Final = MQTTErrorCode.MQTT_ERR_SUCCESS
_READ_CHUNK: Final = 65_536
_WRITE_LIMIT: Final = 1 << 20
_READ_EVENTS: Final = select.POLLIN | select.POLLERR | select.POLLHUP | select.POLLNVAL


class BufferedSocket:
    """A connected, non-blocking TCP socket with reads and writes gathered into bursts.

    Reads: paho reads each packet in pieces (``recv(1)`` for the type, ``recv(1)`` per length
    byte, ``recv(n)`` for the body); they are served from one ``recv`` of up to 64 KiB, and
    ``pending()`` reports what is held (the hook paho already honours for TLS sockets).
    Writes: ``send`` appends to a buffer that ``flush`` writes with one ``send``. Past
    ``_WRITE_LIMIT`` buffered bytes ``send`` raises ``BlockingIOError`` and paho keeps the
    packet queued. A failed flush keeps its error for the next ``recv``, where paho handles a
    lost connection as usual.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.raw = sock
        self.fileno = sock.fileno
        self._data = b""
        self._at = 0
        self._out = bytearray()
        self._error: OSError | None = None

    def recv(self, size: int) -> bytes:
        data, at = self._data, self._at
        if at >= len(data):
            if self._error is not None:
                raise self._error
            data = self.raw.recv(_READ_CHUNK)  # BlockingIOError when empty, b"" on EOF
            if not data:
                return data
            self._data, at = data, 0
        end = min(at + size, len(data))
        self._at = end
        return data[at:end]

    def pending(self) -> int:
        """Bytes read but not handed out yet (1 after a failed flush: paho must read it)."""
        return len(self._data) - self._at or int(self._error is not None)

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
        self._data, self._at = b"", 0
        self.raw.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class LoopDriver:
    """``step(timeout_s)`` is one pass of ``client.loop(timeout_s)``, for one worker thread:
    hand queued packets to the socket, wait for input, read it, keep the connection alive."""

    def __init__(self, client: mqtt.Client, *, buffered: bool = True) -> None:
        self.client = client
        self.buffered = buffered
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
            rc = client.loop_read()
            if rc != _SUCCESS or client.socket() is None:
                return rc
        if (rc := self._write()) != _SUCCESS:
            return rc
        return client.loop_misc()

    def readable(self) -> bool:
        """More input already waiting (buffered, or on the socket): then keep batching."""
        sock = self._current()
        if sock is None:
            return False
        if _pending(sock) > 0:
            return True
        try:
            return bool(self._peek.poll(0))
        except (OSError, ValueError, TypeError):
            return False

    def _write(self) -> MQTTErrorCode:
        """Hand paho's queued packets to the socket; flush a ``BufferedSocket``."""
        client = self.client
        if client.want_write() and (rc := client.loop_write()) != _SUCCESS:
            return rc
        sock = client.socket()
        if type(sock) is BufferedSocket:
            sock.flush()
        return _SUCCESS

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
