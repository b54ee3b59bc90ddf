"""A worker's MQTT socket with reads and writes gathered into bursts, and whole packets only.

paho reads each packet in ~3 ``recv`` calls (type byte, length, body) and writes each packet
with its own ``send``; under ``mqtt_loop.LoopDriver`` it reads and writes through this
wrapper instead, which also lets the driver take packets off the buffer itself (the fast path).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, Final, TypeVar

from adaptedge.cloud.transport.mqtt_framing import complete_end, packet_end

_READ_CHUNK: Final = 65_536
_WRITE_LIMIT: Final = 1 << 20
T = TypeVar("T")


class BufferedSocket:
    """A connected, non-blocking TCP socket with reads and writes gathered into bursts.

    Reads: paho reads each packet in pieces (``recv(1)`` for the type, ``recv(1)`` per length
    byte, ``recv(n)`` for the body); they are served from one ``recv`` of up to 64 KiB (more
    while a large packet is arriving). paho is only ever given whole packets: a packet still
    arriving stays here and ``recv`` says "try again", so between reads paho is always at a
    packet boundary and ``take`` may take the next packet instead, or
    ``hand_over_one`` let paho read just that one. ``pending()`` reports the whole packets
    held (the hook paho already honours for TLS sockets).
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
        """The last ``take`` found nothing more to read (no whole packet held or arrived)."""

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

    def holds_packet(self) -> bool:
        """A whole packet is held (not handed out yet)."""
        return self._at < self._whole

    def hand_over_one(self) -> bool:
        """Let paho's next read see only the whole packet at the front (until
        ``hand_over_all``); False when no whole packet is held."""
        if self._at >= self._whole:
            return False
        end = packet_end(self._data, self._at)
        self._limit = end if end > 0 else None  # malformed: all of it, for paho to refuse
        return True

    def hand_over_all(self) -> None:
        self._limit = None

    def take(self, reader: Callable[[bytes, int, int], T | None], *, read: bool = True
             ) -> T | None:
        """The next whole packet as ``reader(data, start, end)`` sees it (e.g.
        ``mqtt_framing.read_publish``), taken unless that is ``None``; then it stays for paho
        (so does end of stream, and a read error for the next ``recv``). ``read=False``: only
        from what is held (no system call)."""
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
        if end < 0:
            return None  # a malformed length: paho reads it and refuses it
        packet = reader(data, at, end)
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
