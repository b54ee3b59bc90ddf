"""Store-and-forward: forward the outbox's records to the cloud, delete each once it is stored.

``OutboxDrainer`` publishes the oldest records on the device's ``store`` topic (QoS 1) while
the link is up, at most ``rate_per_s`` a second and ``window`` unacknowledged at a time, from
its own thread (a decision never waits for it). The cloud answers each record on the device's
``stored`` topic once the row is committed (``cloud.ingest``); only then is the file deleted.
A record not acknowledged within ``ack_timeout_s``, or in flight when the link dropped, is sent
again: the cloud stores a record once per ``(device, request id, digest)`` and acknowledges
every copy, so a resend after a lost acknowledgement, a reconnect or a restart of either side
neither loses nor duplicates a row. A file that cannot be read is set aside (``.bad``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from adaptedge.edge.outbox import Outbox, read_record
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.store_wire import decode_ack, record_digest
from adaptedge.protocol.topics import DEFAULT_PREFIX, topic

log = logging.getLogger("edge.drain")
DRAIN_COUNTERS: tuple[str, ...] = (
    "drain_sent", "drain_resent", "drain_stored", "drain_duplicates", "drain_refused",
    "drain_unreadable", "drain_unknown_acks", "drain_bytes_escalated", "drain_bytes_audit",
)


class StoreLink(Protocol):
    """What the drainer needs of the device's connection (``edge.MqttUplink`` has it)."""

    def is_connected(self) -> bool: ...

    def add_channel(self, topic: str, on_payload: Callable[[bytes, bool], None]) -> None: ...

    def publish(self, topic: str, payload: bytes, *, qos: int = 0,
                retain: bool = False) -> bool: ...


@dataclass(slots=True)
class _InFlight:
    path: Path
    sent_at: float


class OutboxDrainer:
    """Drains one outbox over one device's link. ``start()`` for the background thread, or
    ``drain(timeout_s)`` to drain once in the caller's thread."""

    def __init__(self, outbox: Outbox, link: StoreLink, device_id: str, *,
                 prefix: str = DEFAULT_PREFIX, rate_per_s: float = 50.0, window: int = 32,
                 ack_timeout_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not rate_per_s > 0 or window < 1 or not ack_timeout_s > 0:
            raise ValueError("the drain needs rate_per_s > 0, window >= 1, ack_timeout_s > 0")
        self.outbox = outbox
        self.link = link
        self.device_id = device_id
        self.store_topic = topic(device_id, "store", prefix)
        self.stored_topic = topic(device_id, "stored", prefix)
        self.rate_per_s = rate_per_s
        self.window = window
        self.ack_timeout_s = ack_timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._in_flight: dict[tuple[int, bytes], _InFlight] = {}
        self._burst = max(1.0, rate_per_s * 0.1)  # token bucket: 100 ms worth of records
        self._tokens = self._burst
        self._refilled = clock()
        self._was_connected = False
        self._stop = threading.Event()
        self._runner: threading.Thread | None = None
        self._counters = dict.fromkeys(DRAIN_COUNTERS, 0.0)
        link.add_channel(self.stored_topic, self._on_ack)

    @property
    def counters(self) -> dict[str, float]:
        with self._lock:
            out = dict(self._counters)
            out["drain_in_flight"] = float(len(self._in_flight))
        out["outbox_records"] = float(len(self.outbox))
        return out

    @property
    def idle(self) -> bool:
        """Nothing left: the outbox is empty and no record awaits its acknowledgement."""
        with self._lock:
            return not self._in_flight and len(self.outbox) == 0

    # -- acknowledgements (the link's network thread) -----------------------------------------
    def _on_ack(self, payload: bytes, retained: bool = False) -> None:
        if retained:  # acknowledgements are never retained: not from the cloud
            return
        try:
            ack = decode_ack(payload)
        except ProtocolError as exc:
            log.warning("edge %s: dropped an undecodable store acknowledgement: %s",
                        self.device_id, exc)
            self._counters["drain_unknown_acks"] += 1
            return
        with self._lock:
            entry = self._in_flight.pop((ack.request_id, ack.digest), None) \
                if ack.device == self.device_id else None
            if entry is None:
                self._counters["drain_unknown_acks"] += 1
                return
            name = {"stored": "drain_stored", "duplicate": "drain_duplicates"}.get(
                ack.status, "drain_refused")
            self._counters[name] += 1
            # Removed while the lock is held: ``step`` marks what is in flight under the lock and
            # then lists the outbox, so it never sees an acknowledged record's file as fresh and
            # sends (and counts) it a second time.
            self.outbox.remove(entry.path)
        if ack.status == "refused":
            log.warning("edge %s: the cloud refused record %d for good (%s); dropping it",
                        self.device_id, ack.request_id, ack.message)

    # -- sending -------------------------------------------------------------------------------
    def step(self) -> int:
        """Send what the rate and window allow now; the number of records published."""
        connected = self.link.is_connected()
        now = self._clock()
        with self._lock:
            if not connected or not self._was_connected:
                for entry in self._in_flight.values():  # the link dropped: send them again
                    entry.sent_at = -float("inf")
            self._was_connected = connected
            if not connected:
                return 0
            paths: list[tuple[tuple[int, bytes] | None, Path]] = [
                (k, e.path) for k, e in self._in_flight.items()
                if now - e.sent_at >= self.ack_timeout_s]
            busy = {e.path for e in self._in_flight.values()}
            room = self.window - len(self._in_flight) + len(paths)
        due = len(paths)
        if room > due:
            fresh = [p for p in self.outbox.oldest(self.window + len(busy)) if p not in busy]
            paths += [(None, p) for p in fresh[: room - due]]
        self._tokens = min(self._burst, self._tokens + (now - self._refilled) * self.rate_per_s)
        self._refilled = now
        sent = 0
        for key, path in paths:
            if self._tokens < 1.0 or not self._send(key, path, now):
                break
            sent += 1
            self._tokens -= 1.0
        return sent

    def _send(self, key: tuple[int, bytes] | None, path: Path, now: float) -> bool:
        try:
            payload, record, request = read_record(path)
        except FileNotFoundError:  # acknowledged and removed meanwhile
            return True
        except (OSError, ProtocolError) as exc:
            self._set_aside(path, exc)
            return True
        fresh_key = (request.request_id, record_digest(record.request))
        if not self.link.publish(self.store_topic, payload, qos=1):
            return False
        with self._lock:
            self._in_flight[fresh_key] = _InFlight(path, now)
            self._counters["drain_resent" if key is not None else "drain_sent"] += 1
            self._counters[f"drain_bytes_{record.kind}"] += len(payload)
        return True

    def _set_aside(self, path: Path, exc: Exception) -> None:
        log.warning("edge %s: outbox file %s is not a record (%s); set aside as .bad",
                    self.device_id, path, exc)
        self._counters["drain_unreadable"] += 1
        with contextlib.suppress(OSError):
            path.rename(path.with_suffix(".bad"))
        self.outbox.remove(path)

    # -- driving -------------------------------------------------------------------------------
    def drain(self, timeout_s: float, tick_s: float = 0.01) -> bool:
        """Drain in this thread until the outbox is empty and every record is acknowledged
        (True), or ``timeout_s`` passed (False)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.idle:
                return True
            self.step()
            time.sleep(tick_s)
        return self.idle

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait (while the background thread drains) until ``idle`` or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        while not self.idle and time.monotonic() < deadline and self.link.is_connected():
            time.sleep(0.01)
        return self.idle

    def start(self, tick_s: float = 0.05) -> OutboxDrainer:
        """Drain in a background thread until ``stop()``."""
        if self._runner is None:
            self._stop.clear()
            self._runner = threading.Thread(target=self._run, args=(tick_s,), daemon=True,
                                            name=f"edge[{self.device_id}].drain")
            self._runner.start()
        return self

    def _run(self, tick_s: float) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # never let a bug here touch the device's decisions
                log.exception("edge %s: the outbox drain failed a step; continuing",
                              self.device_id)
            self._stop.wait(tick_s)

    def stop(self) -> None:
        self._stop.set()
        thread, self._runner = self._runner, None
        if thread is not None:
            thread.join(timeout=5)
