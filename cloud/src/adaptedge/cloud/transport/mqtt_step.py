"""One pass of paho's network loop through its public external-loop API, for a client that one
thread owns (the worker's).

``client.loop`` makes a wake-up socketpair so that other threads' publishes can interrupt its
``select``; from then on every queued packet writes a byte to it and every pass reads it back.
A worker publishes only from its own thread and needs none of that: ``NetworkLoop.step`` is
``client.loop`` through ``loop_write``, ``loop_read``, ``loop_misc`` and ``want_write``,
waiting with one registered ``poll`` object. Every connect, reconnect and wait of that client
goes through ``step`` (one ``client.loop`` call would create the socketpair for good). paho
reads, writes and keeps its keep-alive clock itself: nothing here touches a packet.
"""

from __future__ import annotations

import select
from typing import Any, Final

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

_SUCCESS: Final = MQTTErrorCode.MQTT_ERR_SUCCESS
_READ_EVENTS: Final = select.POLLIN | select.POLLERR | select.POLLHUP | select.POLLNVAL


class NetworkLoop:
    """``step(timeout_s)``: write what paho has queued, wait for input, read it, keep alive.
    ``readable()``: input is waiting (then a worker keeps batching)."""

    def __init__(self, client: mqtt.Client) -> None:
        self.client = client
        self._seen: Any = None
        self._wait = select.poll()
        self._peek = select.poll()
        self._mask = 0

    def step(self, timeout_s: float) -> MQTTErrorCode:
        client = self.client
        sock = self._current()
        if sock is None:
            return MQTTErrorCode.MQTT_ERR_NO_CONN
        if client.want_write() and (rc := client.loop_write()) != _SUCCESS:
            return rc
        ready = _pending(sock) > 0
        if not ready:
            mask = select.POLLIN | (select.POLLOUT if client.want_write() else 0)
            if mask != self._mask:
                self._wait.modify(sock, mask)
                self._mask = mask
            try:
                events = self._wait.poll(timeout_s * 1000.0)
            except (OSError, ValueError, TypeError):  # closed under us: loop_read reports it
                events = [(0, select.POLLNVAL)]
            ready = bool(events) and bool(events[0][1] & _READ_EVENTS)
        if ready:
            rc = client.loop_read()
            if rc != _SUCCESS or client.socket() is None:
                return rc
        if client.want_write() and (rc := client.loop_write()) != _SUCCESS:
            return rc
        return client.loop_misc()

    def readable(self) -> bool:
        sock = self._current()
        if sock is None:
            return False
        if _pending(sock) > 0:
            return True
        try:
            return bool(self._peek.poll(0))  # half a select's cost: no lists built per call
        except (OSError, ValueError, TypeError):
            return False

    def _current(self) -> Any:
        """The client's socket; a new connection's is registered on first sight."""
        sock = self.client.socket()
        if sock is not self._seen and sock is not None:
            self._seen = sock
            self._wait, self._peek = select.poll(), select.poll()
            self._wait.register(sock, select.POLLIN)
            self._peek.register(sock, select.POLLIN)
            self._mask = select.POLLIN
        return sock


def _pending(sock: Any) -> int:
    """Bytes a TLS socket has already decrypted but not handed out (0 for plain TCP)."""
    pending = getattr(sock, "pending", None)
    try:
        return int(pending()) if pending is not None else 0
    except (OSError, ValueError):
        return 0
