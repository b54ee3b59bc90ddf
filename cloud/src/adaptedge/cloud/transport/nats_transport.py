"""The service core behind a NATS cluster (nats-py, the ``nats`` extra).

Devices keep speaking MQTT 3.1.1 to the NATS servers' MQTT listeners; a topic ``a/b/c`` is
the NATS subject ``a.b.c``. Workers join one queue group on ``<prefix>.v1.*.req.<bundle>`` for
each bundle they serve (a queue group is its name and its subject: the server delivers each
request to one member among the workers serving its bundle) and one on ``<prefix>.v1.*.req``
for older devices (``ServiceCore`` forwards what it does not serve), and publish replies on ``<prefix>.v1.<device>.resp``,
which reach the device's MQTT subscription on whichever node it is connected to. nats-py
reconnects to another server of the list (and the ones the cluster announces) by itself and
re-subscribes; requests in flight on a node that dies are lost there and resent by devices.

An asyncio loop owned by the serving thread: every subscription's callback only appends
``(subject, payload, arrival time)`` to one inbox; the loop hands them to the core one by one,
and the core flushes a batch when it is full or the inbox is empty (``readable``). Replies
are queued by the core's ``publish`` and written after each step. The backlog probe goes to
the worker's own telemetry subject and comes back through the same inbox, behind every
request already waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
import time
from collections import deque
from typing import TYPE_CHECKING

from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.service.core import ServiceCore
from adaptedge.cloud.transport.connection import BrokerRefused, TlsFiles

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg
    from nats.aio.subscription import Subscription

_IDLE_TICK_S = 0.05
CONNECT_TIMEOUT_S = 10.0


def nats_servers(broker_url: str) -> list[str]:
    """The server URLs of ``nats://HOST:PORT[,nats://HOST:PORT...]`` (``CloudError`` if one
    is not a nats:// or tls:// URL)."""
    servers = [u.strip() for u in broker_url.split(",") if u.strip()]
    for url in servers:
        if not url.lower().startswith(("nats://", "tls://")):
            raise CloudError(f"broker URL {url!r} in a NATS server list is not "
                             "nats://HOST:PORT or tls://HOST:PORT")
    if not servers:
        raise CloudError("the NATS server list is empty: give nats://HOST:PORT[,...]")
    return servers


def to_subject(topic: str) -> str:
    """MQTT topic ``a/b/c`` -> NATS subject ``a.b.c`` (the NATS MQTT listener's mapping)."""
    return topic.replace("/", ".")


def to_topic(subject: str) -> str:
    return subject.replace(".", "/")


class _Outbox:
    """The core's wire: publishes are queued here and written by the loop after each step."""

    def __init__(self) -> None:
        self.items: deque[tuple[str, bytes]] = deque()

    def publish(self, topic: str, payload: bytes, qos: int = 0) -> None:
        self.items.append((to_subject(topic), payload))


class NatsTransport:
    """Connects to a NATS server list, joins the queue group, serves, drains."""

    def __init__(self, core: ServiceCore, broker_url: str, *, group: str | None,
                 username: str | None, password: str | None, tls: TlsFiles | None,
                 stats_every_s: float, max_refusals: int, logger: logging.Logger) -> None:
        self.core, self.group, self.log = core, group, logger
        self.servers = nats_servers(broker_url)
        self._user, self._password = username, password
        self._tls = tls if tls is not None else (
            TlsFiles() if any(s.lower().startswith("tls://") for s in self.servers) else None)
        self.stats_every_s = stats_every_s
        self._max_refusals = max_refusals
        self.shared_subscription = group is not None
        self._outbox = _Outbox()
        self._inbox: deque[tuple[str, bytes, float]] = deque()
        self._arrived: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._nc: Client | None = None
        self._request_subs: list[Subscription] = []
        self._refusals = 0
        self._permission_errors = 0
        self.last_error: str | None = None
        self.reconnects = 0
        core.bind(self._outbox, self._readable)

    @property
    def description(self) -> str:
        queue = f" in queue group {self.group}" if self.group is not None else ""
        subjects = ", ".join(to_subject(f).replace("+", "*") for f in self.core.request_filters)
        return f"NATS subjects {subjects}{queue}"

    def extra_stats(self) -> dict[str, float]:
        return {"shared_subscription": int(self.shared_subscription),
                "reconnects": self.reconnects}

    # -- lifecycle (called from the owning threads, never concurrently) -------------------------
    def open(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._open())
        except BaseException:
            self.close()
            raise

    def serve(self, stopping: threading.Event, stop_timeout_s: float) -> None:
        assert self._loop is not None, "open() first"
        try:
            self._loop.run_until_complete(self._serve(stopping, stop_timeout_s))
        finally:
            self.close()

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None or loop.is_closed():
            return
        try:
            if self._nc is not None and not self._nc.is_closed:
                loop.run_until_complete(asyncio.wait_for(self._nc.close(), 5.0))
        except (Exception, asyncio.CancelledError) as exc:
            self.log.warning("closing the NATS connection: %s", exc)
        finally:
            loop.close()

    # -- connection --------------------------------------------------------------------------
    async def _open(self) -> None:
        import nats

        self._arrived = asyncio.Event()
        context = None
        if self._tls is not None:
            context = ssl.create_default_context(cafile=self._tls.ca)
            if self._tls.cert is not None:
                context.load_cert_chain(self._tls.cert, self._tls.key)
        # Servers in the given order (worker i lists its own node first); nats-py retries
        # the list for ever, so the wait is bounded here, and refusals end it early.
        connecting = asyncio.ensure_future(nats.connect(
            servers=self.servers, name=self.core.worker_id, user=self._user,
            password=self._password, tls=context, allow_reconnect=True,
            max_reconnect_attempts=-1, reconnect_time_wait=0.2, connect_timeout=2,
            dont_randomize=True, ping_interval=5, max_outstanding_pings=2,
            error_cb=self._on_error, disconnected_cb=self._on_disconnected,
            reconnected_cb=self._on_reconnected))
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while not connecting.done() and time.monotonic() < deadline \
                and self._refusals < self._max_refusals:
            await asyncio.wait({connecting}, timeout=0.05)
        if not connecting.done():
            connecting.cancel()
            with contextlib.suppress(BaseException):
                await connecting
            if self._refusals >= self._max_refusals:
                raise BrokerRefused(f"the NATS servers refused the worker's credentials "
                                    f"({self.last_error}): check --username/--password-file "
                                    "and the accounts file")
            raise CloudError(f"cannot connect to the NATS servers {','.join(self.servers)} "
                             f"within {CONNECT_TIMEOUT_S:g} s ({self.last_error}): check "
                             "--broker and that the servers run")
        try:
            self._nc = connecting.result()
        except (OSError, nats.errors.Error) as exc:
            raise CloudError(f"cannot connect to the NATS servers: {exc}") from None
        queue = self.group or ""
        for request_filter in self.core.request_filters:
            self._request_subs.append(await self._nc.subscribe(
                to_subject(request_filter).replace("+", "*"), queue=queue, cb=self._enqueue))
        await self._nc.subscribe(to_subject(self.core.telemetry_topic), cb=self._enqueue)
        if self.core.telemetry_filter is not None:
            await self._nc.subscribe(to_subject(self.core.telemetry_filter).replace("+", "*"),
                                     queue=queue, cb=self._enqueue)
        await self._nc.flush(timeout=5)  # the server has our subscriptions (or refused them)
        await asyncio.sleep(0.05)  # and its -ERR for a refused one has been read
        if self._permission_errors:
            raise BrokerRefused(f"the NATS server refused the worker's subscriptions: "
                                f"{self.last_error} (check the account's permissions)")

    async def _enqueue(self, msg: Msg) -> None:
        self._inbox.append((msg.subject, msg.data, time.monotonic()))
        if self._arrived is not None:
            self._arrived.set()

    async def _on_error(self, exc: Exception) -> None:
        self.last_error = str(exc) or type(exc).__name__
        if "authorization" in self.last_error.lower():
            self._refusals += 1  # credentials refused (consecutive; reset on reconnect)
        elif "permission" in self.last_error.lower():
            self._permission_errors += 1
        self.log.warning("NATS: %s", self.last_error)

    async def _on_disconnected(self) -> None:
        self.log.warning("lost the NATS server connection; reconnecting")

    async def _on_reconnected(self) -> None:
        self.reconnects += 1
        self._refusals = 0
        url = self._nc.connected_url if self._nc is not None else None
        self.log.info("reconnected to NATS server %s", url.netloc if url else "?")

    def _readable(self) -> bool:
        return bool(self._inbox) or any(sub.pending_msgs > 0 for sub in self._request_subs)

    # -- the loop ----------------------------------------------------------------------------
    async def _send(self) -> None:
        nc, items = self._nc, self._outbox.items
        assert nc is not None
        while items:
            subject, payload = items.popleft()
            await nc.publish(subject, payload)

    async def _step(self, wait_s: float) -> None:
        """Hand the next message (if one arrives within ``wait_s``) to the core."""
        core, batch, inbox, arrived = self.core, self.core.batch, self._inbox, self._arrived
        assert arrived is not None
        if not inbox and wait_s > 0:
            arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arrived.wait(), wait_s)
        if inbox:
            subject, payload, received = inbox.popleft()
            core.on_message(to_topic(subject), payload, received)
        if batch.items and (batch.due(time.monotonic()) or not self._readable()):
            core.flush()
        await self._send()

    async def _serve(self, stopping: threading.Event, stop_timeout_s: float) -> None:
        batch = self.core.batch
        next_stats = time.monotonic() + self.stats_every_s
        while not stopping.is_set():
            if self._refusals >= self._max_refusals:
                raise BrokerRefused(f"the NATS server keeps refusing the worker: "
                                    f"{self.last_error}")
            now = time.monotonic()
            await self._step(min(batch.time_left(now), _IDLE_TICK_S,
                                 max(0.0, next_stats - now)))
            if time.monotonic() >= next_stats:
                self.core.report(self.extra_stats())
                await self._send()
                next_stats = time.monotonic() + self.stats_every_s
        await self._drain(stop_timeout_s)

    async def _drain(self, timeout_s: float) -> None:
        """Leave the queue group, answer everything received, flush the replies, close."""
        nc, core = self._nc, self.core
        assert nc is not None
        deadline = time.monotonic() + timeout_s
        if core.backlog is not None:
            core.backlog.close()
        try:
            for sub in self._request_subs:  # no more routed to us; what came is handed on
                await asyncio.wait_for(sub.drain(), timeout_s)  # type: ignore[no-untyped-call]
            while (self._readable() or core.batch.items) and time.monotonic() < deadline:
                await self._step(0.0)
            core.report(self.extra_stats())
            await self._send()
            await nc.flush(timeout=max(1, int(timeout_s)))  # every reply reached the server
        except (Exception, asyncio.CancelledError) as exc:  # best effort: closing anyway
            self.log.warning("worker %s: draining was cut short: %s", core.worker_id, exc)
        await nc.close()
        self.log.info("worker %s stopped", core.worker_id)
