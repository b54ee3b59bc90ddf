"""A loopback TCP proxy that impairs the link between devices and the broker.

Devices connect to the proxy instead of the broker. Each direction of each connection is
delayed by ``delay_ms`` (plus a seeded uniform ``jitter_ms``; byte order is kept), and the
proxy can be **cut**: every open connection is closed and new ones are refused (closed at
once) until it is restored, as a dead radio link would look to an MQTT client. With ``loss``,
each QoS 0 MQTT publish is dropped with that probability (``simulator.mqtt_loss``). Outages given
as (start_s, duration_s) are applied on a schedule that starts with ``start_schedule()``.
It runs an asyncio loop in a daemon thread; ``stop()`` closes everything and joins it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType

from adaptedge.simulator.brokers import HOST, free_port, wait_for_port
from adaptedge.simulator.mqtt_loss import PublishDropper
from adaptedge.simulator.network import Outage


class ImpairedProxy:
    """``127.0.0.1:port`` -> ``target_host:target_port`` with delay, jitter and cuts."""

    def __init__(self, target_port: int, *, target_host: str = HOST, port: int | None = None,
                 delay_ms: float = 0.0, jitter_ms: float = 0.0,
                 outages: Sequence[Outage] = (), seed: int = 0, loss: float = 0.0) -> None:
        if delay_ms < 0 or jitter_ms < 0:
            raise ValueError("proxy delay_ms and jitter_ms must be >= 0")
        self.loss = loss
        self.droppers: list[PublishDropper] = []
        PublishDropper(loss, random.Random(seed))  # checks loss now
        self.target = (target_host, target_port)
        self.port = port or free_port()
        self.delay_s = delay_ms / 1000.0
        self.jitter_s = jitter_ms / 1000.0
        self.outages = tuple(outages)
        self._rng = random.Random(seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._cut = False
        self._schedule: asyncio.Task[None] | None = None
        self.connections = 0
        self.refused = 0
        self._armed_at: int | None = None
        self._started = threading.Event()
        self.schedule_started: float | None = None
        self.cuts: list[tuple[float, float | None]] = []
        """(wall start, wall end or None) of every cut, in ``time.time()`` seconds."""

    @property
    def url(self) -> str:
        return f"mqtt://{HOST}:{self.port}"

    def __enter__(self) -> ImpairedProxy:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout_s: float = 10.0) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._accept, HOST, self.port))
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=serve, name="impaired-proxy", daemon=True)
        self._thread.start()
        ready.wait(timeout_s)
        if failure:
            raise RuntimeError(f"proxy could not listen on {HOST}:{self.port}: {failure[0]}")
        wait_for_port(self.port, timeout_s)

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        with contextlib.suppress(Exception):
            fut.result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._loop = self._thread = self._server = None

    async def _shutdown(self) -> None:
        if self._schedule is not None:
            self._schedule.cancel()
        if self._server is not None:
            self._server.close()
        self._close_all()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- cuts -------------------------------------------------------------------------------
    def cut(self) -> None:
        """Close every connection and refuse new ones until ``restore()``."""
        self._call(self._do_cut)

    def restore(self) -> None:
        self._call(self._do_restore)

    def start_schedule(self, after_connections: int = 0) -> None:
        """Apply ``outages`` relative to now, or to the moment ``after_connections`` clients
        have connected (so the schedule starts with the devices, not with their imports)."""
        if self._loop is None:
            raise RuntimeError("the proxy is not running: call start() first")

        def arm() -> None:
            self._armed_at = after_connections
            self._maybe_begin()

        self._loop.call_soon_threadsafe(arm)

    def wait_started(self, timeout_s: float) -> float | None:
        """Block until the schedule has started; its ``time.time()``, or None on timeout."""
        self._started.wait(timeout_s)
        return self.schedule_started

    def _maybe_begin(self) -> None:
        if self._armed_at is None or self.connections < self._armed_at:
            return
        self._armed_at = None
        self.schedule_started = time.time()
        self._started.set()
        if self.outages:
            self._schedule = asyncio.ensure_future(self._run_schedule())

    def _call(self, fn: Callable[[], None]) -> None:
        loop = self._loop
        if loop is None:
            raise RuntimeError("the proxy is not running: call start() first")

        async def run() -> None:
            fn()

        asyncio.run_coroutine_threadsafe(run(), loop).result(timeout=5)

    def _do_cut(self) -> None:
        if not self._cut:
            self._cut = True
            self.cuts.append((time.time(), None))
        self._close_all()

    def _do_restore(self) -> None:
        if self._cut:
            self._cut = False
            start, _ = self.cuts[-1]
            self.cuts[-1] = (start, time.time())

    def _close_all(self) -> None:
        for w in list(self._writers):
            with contextlib.suppress(Exception):
                w.transport.abort()
        self._writers.clear()

    async def _run_schedule(self) -> None:
        t0 = time.monotonic()
        events = sorted([(o.start_s, True) for o in self.outages]
                        + [(o.end_s, False) for o in self.outages])
        for at, down in events:
            await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
            if down:
                self._do_cut()
            else:
                self._do_restore()

    # -- forwarding -------------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        for w in (writer, up_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connections += 1
        self._writers.update((writer, up_writer))
        self._maybe_begin()
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        except asyncio.CancelledError:
            pass  # proxy shutting down
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                with contextlib.suppress(Exception):
                    w.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        delayed = self.delay_s > 0 or self.jitter_s > 0

        async def deliver() -> None:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    writer.transport.abort()
                    return
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(chunk)
                await writer.drain()

        sender = asyncio.ensure_future(deliver()) if delayed else None
        last_due = 0.0
        dropper = None
        if self.loss > 0:  # whole QoS 0 publishes lost (simulator.mqtt_loss)
            dropper = PublishDropper(self.loss, random.Random(self._rng.random()))
            self.droppers.append(dropper)
        try:
            while True:
                chunk = await reader.read(65536)
                if chunk and dropper is not None:
                    chunk = dropper.feed(chunk)
                    if not chunk:
                        continue
                if not delayed:
                    if not chunk:
                        break
                    writer.write(chunk)
                    await writer.drain()
                    continue
                due = loop.time() + self.delay_s + self._rng.uniform(0.0, self.jitter_s)
                last_due = max(last_due, due)  # keep byte order
                queue.put_nowait((last_due, chunk))
                if not chunk:
                    break
            if sender is not None:
                await sender
        except (ConnectionError, OSError):
            pass
        finally:
            if sender is not None and not sender.done():
                sender.cancel()
            writer.transport.abort()
