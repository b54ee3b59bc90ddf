"""The transport-independent service core: what a worker does with each message it receives.

A transport (``cloud/mqtt_transport.py`` over paho, ``cloud/nats_transport.py`` over nats-py)
hands every incoming message to ``accept(topic, payload, received)`` with its MQTT topic
(``a/b/c``) and the monotonic time it arrived, and gives the core a ``Wire`` to publish on
and a ``readable()`` that says whether more input is already waiting. The core decodes,
deduplicates, estimates each request's age, micro-batches, sheds what can no longer be
answered in time, runs the HPC and publishes one reply per request; it also keeps the stats
and the telemetry inbox. ``accept`` flushes the batch when it is full or when nothing more is
waiting (a lone request waits for nobody; a burst shares one call); the transport flushes a
batch whose oldest request has waited ``max_wait_ms`` (``batch.due``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from adaptedge.cloud.fleet.telemetry import TelemetryInbox
from adaptedge.cloud.service.batcher import MicroBatch
from adaptedge.cloud.service.bundle_pool import BundlePool
from adaptedge.cloud.service.dedup import PENDING, REUSED, ContentKey, RecentRequests, content_key
from adaptedge.cloud.service.inference import HpcInference, Reply
from adaptedge.cloud.service.shedding import BacklogProbe, LoadShedder, Pending, shed_late
from adaptedge.cloud.service.stats import ServiceStats, log_line
from adaptedge.protocol import errors as E
from adaptedge.protocol.codec import encode
from adaptedge.protocol.messages import ErrorReply, InferenceRequest, Telemetry
from adaptedge.protocol.topics import bundle_requests, request_topic, telemetry_topic, wildcard


class Wire(Protocol):
    """Where replies, probes and stats go: ``publish(topic, payload, qos=...)`` with an MQTT
    topic (a NATS transport maps it to a subject)."""

    def publish(self, topic: str, payload: bytes, qos: int = 0) -> Any: ...


def _never() -> bool:
    return False


class ServiceCore:
    """Decode, dedup, deadlines, shedding, micro-batching, the HPC call and the stats."""

    def __init__(self, inference: HpcInference | BundlePool, worker_id: str, *, prefix: str,
                 max_batch: int, max_wait_ms: float, dedup_capacity: int,
                 max_queue_ms: float | None, collect_telemetry: bool,
                 logger: logging.Logger) -> None:
        self.inference = inference
        self.worker_id = worker_id
        self.prefix = prefix
        self.log = logger
        self.telemetry_topic = telemetry_topic(worker_id, prefix)
        self.request_filter = wildcard("req", prefix)
        """Requests on the plain topic of older devices (any bundle: forwarded if not ours)."""
        self.request_filters = (self.request_filter,
                                *(bundle_requests(b, prefix) for b in inference.bundle_ids))
        """Every filter a worker subscribes for requests: the plain one, then one per bundle
        served (``<prefix>/v1/+/req/<bundle>``: the broker routes by bundle)."""
        self.telemetry_filter = wildcard("telemetry", prefix) if collect_telemetry else None
        self.batch: MicroBatch[Pending] = MicroBatch(max_batch, max_wait_ms)
        self.recent = RecentRequests(dedup_capacity)
        self.shedder = LoadShedder(max_queue_ms)
        self.stats = ServiceStats()
        self.telemetry = TelemetryInbox(prefix)
        self.published = 0
        """Messages handed to the wire (replies, probes, stats): the transport's ack target."""
        self.wire: Wire | None = None
        self.readable: Callable[[], bool] = _never
        self.backlog: BacklogProbe | None = None
        self.started_at = 0.0
        self._answer_one = inference.answer_one if isinstance(inference, HpcInference) else None
        self._pool = inference if isinstance(inference, BundlePool) else None

    def bind(self, wire: Wire, readable: Callable[[], bool]) -> None:
        """Attach the transport: where to publish, and whether more input is waiting."""
        self.wire, self.readable = wire, readable
        self.backlog = BacklogProbe(wire, self.telemetry_topic, self.worker_id)

    # -- input -------------------------------------------------------------------------------
    def on_message(self, topic: str, payload: bytes | bytearray, received: float, *,
                   retained: bool = False) -> None:
        """One message from the transport; a bug never stops the worker (counted, logged)."""
        try:
            if topic == self.telemetry_topic:
                if self.backlog is not None:
                    self.backlog.on_payload(payload)
            elif self.telemetry_filter is not None and topic.endswith("/telemetry"):
                if not retained:  # retained copies are old news
                    self.telemetry.accept(topic, payload)
            else:
                self.accept(topic, payload, received, retained=retained)
        except Exception:
            self.inference.error_counts[E.INTERNAL] += 1
            self.log.exception("worker %s failed on a message; continuing", self.worker_id)

    def accept(self, topic: str, payload: bytes | bytearray, received: float, *,
               retained: bool = False) -> None:
        """A request: queue it (or its cached/error answer) and flush when due."""
        stats = self.stats
        stats.received += 1
        if retained:  # stored on the broker earlier: its device has long moved on
            stats.retained += 1
            return
        prepared = self.inference.prepare(topic, payload)
        if prepared is None:
            stats.dropped_topics += 1
            return
        reply_to, item = prepared
        device = item.device
        entry: InferenceRequest | ErrorReply | bytes = item
        digest: ContentKey = b""
        age = 0.0
        if type(item) is InferenceRequest:
            if topic[-4:] == "/req" and not self.inference.serves(item.bundle_id):
                self._forward(item, payload)
                return
            digest = content_key(item)
            cached = self.recent.seen(device, item.request_id, digest)
            if cached is None:
                age = self.shedder.ages.age_on_arrival(device, item.sent_at, received)
            elif cached is REUSED:
                digest, entry = b"", self.inference.error(
                    device, item.request_id, E.ID_REUSED, f"request id {item.request_id} is "
                    "still being answered for other features: give every request a new id")
            else:
                stats.duplicates += 1
                if cached == PENDING:
                    return  # the pending batch answers it
                stats.resent += 1
                entry = cached
        # Flush at once when the batch is full or nothing more is waiting (over MQTT the
        # replies are then written ahead of this message's PUBACK).
        batch, pending = self.batch, (received, reply_to, device, entry, digest, age)
        if batch.items or entry is not item or not digest:
            if batch.add(pending, received):
                self.flush()
            elif not self.readable():
                self.flush(idle=True)
        elif batch.max_batch > 1 and self.readable():
            batch.add(pending, received)
        elif not self._answer_alone(pending):  # a lone fresh request
            batch.add(pending, received)
            self.flush(idle=True)

    def _forward(self, request: InferenceRequest, payload: bytes | bytearray) -> None:
        """A plain-topic request of a bundle this worker does not serve goes to the bundle's
        topic, where the workers serving it are (nobody answers it if none runs)."""
        if self.wire is None:
            return
        self.wire.publish(request_topic(request.device, self.prefix, request.bundle_id),
                          bytes(payload), qos=1)
        self.published += 1
        self.stats.forwarded += 1

    # -- output ------------------------------------------------------------------------------
    def _answer_alone(self, pending: Pending) -> bool:
        """The latency path: answer a lone fresh request now, without the batch; False when
        it needs the batch path (late, unusual, or no bound row)."""
        backlog, wire, answer_one = self.backlog, self.wire, self._answer_one
        received, reply_to, device, request, digest, age = pending
        if backlog is None or wire is None or answer_one is None \
                or type(request) is not InferenceRequest:
            return False
        now = time.monotonic()
        backlog.send_if_due(_never, now)  # idle: no probe (0 published), the backlog is empty
        shedder = self.shedder
        if not shedder.in_time(request, max(age, backlog.current(now)) + (now - received)
                               + shedder.row_s):
            return False
        reply = answer_one(request)
        if reply is None:
            return False
        done_at = time.monotonic()
        payload = encode(reply)
        wire.publish(reply_to, payload, qos=1)  # the bookkeeping after: the reply goes first
        self.published += 1
        self.recent.settle(device, request.request_id, digest, payload,
                           answer=type(reply) is not ErrorReply)
        shedder.record_compute(1, done_at - now, sample=type(reply) is not ErrorReply,
                               now=done_at)
        self.stats.record_flush([(done_at - received) * 1000.0])
        return True

    def flush(self, *, idle: bool = False) -> None:
        """Shed what is late, run the HPC on the rest, publish one reply per request.
        ``idle``: the caller just found no more input waiting (no need to ask again)."""
        items = self.batch.take()
        if not items or self.wire is None or self.backlog is None:
            return
        now = time.monotonic()
        self.published += self.backlog.send_if_due(_never if idle else self.readable, now)
        requests = shed_late(items, self.shedder, self.backlog, self.inference.error, now)
        if requests:
            replies, done_at = self._compute(requests)
            answers = iter(replies)
        else:
            answers, done_at = iter(()), time.monotonic()
        publish, recent = self.wire.publish, self.recent
        for _, reply_to, device, item, digest, _ in items:
            if isinstance(item, bytes):
                payload = item
            else:
                reply = next(answers) if isinstance(item, InferenceRequest) else item
                payload = encode(reply)
                if digest and reply.request_id is not None:  # only answers are cached
                    recent.settle(device, reply.request_id, digest, payload,
                                  answer=type(reply) is not ErrorReply)
            publish(reply_to, payload, qos=1)
        self.published += len(items)
        self.stats.record_flush([(done_at - item[0]) * 1000.0 for item in items])

    def _compute(self, requests: list[InferenceRequest]) -> tuple[list[Reply], float]:
        """Run the HPC on ``requests`` (their replies and when they were ready) and give the
        shedder the compute time: a lazy bundle load is not compute, and a batch in which the HPC failed
        (a run cut at the time limit) is no sample of the time per row."""
        pool, failures = self._pool, self.inference.error_counts
        loading, failed = (pool.load_s if pool is not None else 0.0), failures[E.INTERNAL]
        started = time.monotonic()
        replies = self.inference.handle_batch(requests)
        done_at = time.monotonic()
        if pool is not None:
            started += pool.load_s - loading
        self.shedder.record_compute(len(requests), done_at - started,
                                    sample=failures[E.INTERNAL] == failed, now=done_at)
        return replies, done_at

    # -- stats -------------------------------------------------------------------------------
    def snapshot(self, *, reset_window: bool) -> dict[str, float]:
        snap = self.stats.snapshot(self.inference.error_counts, len(self.batch),
                                   reset_window=reset_window)
        snap["uptime_s"] = time.monotonic() - self.started_at if self.started_at else 0.0
        snap.update(self.telemetry.counters())
        backlog = self.backlog.current(time.monotonic()) if self.backlog is not None else 0.0
        snap["backlog_ms"] = backlog * 1000.0
        snap["clock_resets"] = self.shedder.ages.clock_resets
        snap["shed_reprobes"] = self.shedder.reprobes
        return snap

    def report(self, extra: dict[str, float]) -> None:
        """Log the stats and publish them as the worker's telemetry (QoS 0)."""
        snap = self.snapshot(reset_window=True)
        snap.update(extra)
        self.log.info("stats %s", log_line(snap))
        if self.wire is None:
            return
        try:
            self.wire.publish(self.telemetry_topic,
                              encode(Telemetry(self.worker_id, time.time(), snap)), qos=0)
            self.published += 1  # paho reports QoS 0 publishes to on_publish too
        except (ValueError, OSError) as exc:
            self.log.warning("could not publish stats telemetry: %s", exc)
