"""The cloud worker: requests in over MQTT, micro-batched through the HPC, replies out.

One thread owns the paho client and drives its loop by hand, so there is no per-message thread
handoff: ``on_message`` decodes into the pending batch and flushes it when it is full or when
no more input is waiting on the socket (a lone request waits for nobody; a burst shares one
call); the loop flushes a batch whose oldest request has waited ``max_wait_ms``. A flush is
one onnxruntime call and one QoS 1 publish per reply, written ahead of the request's PUBACK.

Before computing, a batch loses what can no longer be answered in time: those requests get
``expired``/``overloaded`` error replies (``cloud/shedding.py``); retained requests are ignored.
Workers are stateless apart from the dedup cache: start any number in one shared-subscription
group (``$share/<group>/<prefix>/v1/+/req``) and the broker spreads the requests over them.
"""

from __future__ import annotations

import logging
import os
import re
import select
import socket
import threading
import time
from typing import Any, Literal

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

from adaptedge.cloud.batcher import MicroBatch
from adaptedge.cloud.bundle_pool import BundlePool
from adaptedge.cloud.connection import (
    MAX_REFUSALS,
    TlsFiles,
    connect,
    make_client,
    parse_broker_url,
    reconnect,
)
from adaptedge.cloud.dedup import PENDING, REUSED, RecentRequests, content_digest
from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.guard import DEFAULT_RUN_LIMIT_S
from adaptedge.cloud.inference import HpcInference
from adaptedge.cloud.sharing import probe_shared
from adaptedge.cloud.shedding import BacklogProbe, LoadShedder, Pending, shed_late
from adaptedge.cloud.stats import ServiceStats, log_line
from adaptedge.cloud.telemetry import TelemetryInbox
from adaptedge.protocol import errors as E
from adaptedge.protocol.codec import encode
from adaptedge.protocol.messages import ErrorReply, InferenceReply, InferenceRequest, Telemetry
from adaptedge.protocol.topics import DEFAULT_PREFIX, shared, telemetry_topic, wildcard

ShareMode = Literal["auto", "on", "off"]
_SUCCESS = MQTTErrorCode.MQTT_ERR_SUCCESS
_select = select.select
_IDLE_TICK_S = 0.05
_DRAIN_QUIET_S = 0.1


def default_worker_id() -> str:
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:48] or "host"
    return f"cloud-{host}-{os.getpid()}"


class CloudService:
    """A cloud worker for one bundle. ``start()`` connects and serves in a background thread;
    ``stop()`` stops taking work, answers what is in flight and disconnects cleanly."""

    def __init__(self, bundle_dir: str | os.PathLike[str] | BundlePool, broker_url: str, *,
                 group: str | None = "adaptedge", max_batch: int = 32, max_wait_ms: float = 2.0,
                 username: str | None = None, password: str | None = None,
                 tls: TlsFiles | None = None, prefix: str = DEFAULT_PREFIX,
                 stats_every_s: float = 10.0, client_id: str | None = None,
                 share: ShareMode = "auto", dedup_capacity: int = 8192,
                 max_queue_ms: float | None = None, max_refusals: int = MAX_REFUSALS,
                 run_limit_s: float = DEFAULT_RUN_LIMIT_S, collect_telemetry: bool = False,
                 logger: logging.Logger | None = None) -> None:
        if share not in ("auto", "on", "off"):
            raise ValueError(f"share must be 'auto', 'on' or 'off', got {share!r}")
        if group is None:
            share = "off"
        if not stats_every_s > 0:
            raise ValueError(f"stats_every_s must be > 0, got {stats_every_s}")
        self.log = logger or logging.getLogger("adaptedge.cloud")
        self.address = parse_broker_url(broker_url)
        self.inference = bundle_dir if isinstance(bundle_dir, BundlePool) else \
            HpcInference.load(bundle_dir, prefix=prefix, run_limit_s=run_limit_s)
        self.worker_id = client_id or default_worker_id()
        self.prefix = prefix
        self.group = group
        self.share_mode: ShareMode = share
        self.stats_every_s = stats_every_s
        self.telemetry_topic = telemetry_topic(self.worker_id, prefix)
        self._request_filter = wildcard("req", prefix)
        if group is not None:
            shared(group, self._request_filter)  # validates the group name now
        self._batch: MicroBatch[Pending] = MicroBatch(max_batch, max_wait_ms)
        self._recent = RecentRequests(dedup_capacity)
        self._shedder = LoadShedder(max_queue_ms)
        self._max_refusals = max_refusals
        self.failure: str | None = None
        """Why the worker stopped on its own (e.g. the broker kept refusing it), else None."""
        self._stats = ServiceStats()
        self._tls = tls is not None or self.address.tls
        self._client = make_client(self.worker_id, username=username, password=password,
                                   tls=tls, use_tls=self._tls)
        self._client.on_message = self._on_message
        self._backlog = BacklogProbe(self._client, self.telemetry_topic, self.worker_id)
        self.telemetry = TelemetryInbox(prefix)
        self._telemetry_filter = wildcard("telemetry", prefix) if collect_telemetry else None
        if self._telemetry_filter is not None:
            self._client.message_callback_add(self._telemetry_filter, self._on_telemetry)
        self._client.on_connect = self._on_connect
        self._client.on_publish = self._on_publish
        self._client.on_subscribe = self._on_subscribe_ack
        self._client.on_unsubscribe = self._on_subscribe_ack
        self._filter: str | None = None
        self.shared_subscription = False
        self._published = 0
        self._acked = 0
        self._acks: set[int] = set()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_at = 0.0
        self._stop_timeout_s = 5.0

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Connect, pick shared or plain subscription, subscribe, serve in a thread."""
        if self._thread is not None:
            raise CloudError("this CloudService was already started; create a new one")
        connect(self._client, self.address)
        try:
            self.shared_subscription = self._choose_sharing()
            self._filter = (shared(self.group, self._request_filter)  # type: ignore[arg-type]
                            if self.shared_subscription else self._request_filter)
            self._client.message_callback_add(self.telemetry_topic, self._backlog.on_message)
            self._subscribe()
        except BaseException:
            self._client.disconnect()
            raise
        if self.shared_subscription:
            self.log.info("worker %s serving bundle %s on shared subscription %s",
                          self.worker_id, self.inference.bundle_id, self._filter)
        else:
            self.log.info("worker %s serving bundle %s on plain subscription %s%s",
                          self.worker_id, self.inference.bundle_id, self._filter,
                          " (run ONE worker: every worker receives every request)"
                          if self.group is not None else "")
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._serve, daemon=True,
                                        name=f"svc[{self.worker_id}].serve_loop")
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop taking work, answer in-flight requests, wait for their acks, disconnect."""
        self._stop_timeout_s = timeout_s
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s + 1.0)
            if self._thread.is_alive():
                self.log.warning("worker %s did not stop within %.1f s", self.worker_id, timeout_s)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the serving thread ends; True if it did."""
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def stats(self) -> dict[str, float]:
        """Counters now (the percentile window is not reset)."""
        return self._snapshot(reset_window=False)

    # -- subscription ------------------------------------------------------------------------
    def _choose_sharing(self) -> bool:
        if self.share_mode == "off":
            return False
        if self.share_mode == "on":
            return True
        works, published = probe_shared(self._client, self.group or "adaptedge",
                                        self.telemetry_topic, self.worker_id, self._acks)
        self._published += published
        self.log.info("broker %s shared subscriptions ($share/%s/...): %s",
                      "delivers" if works else "does NOT deliver", self.group,
                      "using them" if works else "falling back to a plain subscription")
        return works

    def _subscribe(self) -> None:
        if self._filter is not None:
            self._client.subscribe(self._filter, qos=1)
            self._client.subscribe(self.telemetry_topic, qos=1)  # backlog probes come back here
        if self._telemetry_filter is not None:
            self._client.subscribe(shared(self.group, self._telemetry_filter)  # type: ignore[arg-type]
                                   if self.shared_subscription else self._telemetry_filter, qos=0)

    def _on_telemetry(self, client: mqtt.Client, userdata: Any,
                      message: mqtt.MQTTMessage) -> None:
        """Device telemetry (with ``collect_telemetry``): recorded only when its source is
        the device of its topic; retained copies are old news."""
        try:
            if not message.retain:
                self.telemetry.accept(message.topic, message.payload)
        except Exception:  # a topic paho cannot decode, or a bug: never stop the worker
            self.telemetry.rejected += 1

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any,
                    props: Any) -> None:
        if reason.is_failure:
            self.log.error("broker refused the reconnection: %s", reason)
            return
        self._subscribe()  # clean session: subscriptions do not survive a reconnect

    def _on_subscribe_ack(self, client: mqtt.Client, userdata: Any, mid: int, reasons: Any,
                          props: Any) -> None:
        self._acks.add(mid)  # SUBACK or UNSUBACK of this message id

    def _on_publish(self, client: mqtt.Client, userdata: Any, mid: int, reason: Any,
                    props: Any) -> None:
        self._acked += 1

    # -- the hot path ------------------------------------------------------------------------
    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        try:
            self._accept(message)
        except Exception:  # a bug must not stop the worker: count it, log it, keep serving
            self.inference.error_counts[E.INTERNAL] += 1
            self.log.exception("worker %s failed on a message; continuing", self.worker_id)

    def _accept(self, message: mqtt.MQTTMessage) -> None:
        received = message.timestamp
        self._stats.received += 1
        if message.retain:  # stored on the broker earlier: its device has long moved on
            self._stats.retained += 1
            return
        try:
            topic = message.topic
        except UnicodeDecodeError:  # paho raises on a topic that is not UTF-8
            self.inference.error_counts[E.BAD_TOPIC] += 1
            return
        prepared = self.inference.prepare(topic, message.payload)
        if prepared is None:
            self._stats.dropped_topics += 1
            return
        reply_to, item = prepared
        device = item.device
        entry: InferenceRequest | ErrorReply | bytes = item
        digest, age = b"", 0.0
        if type(item) is InferenceRequest:
            digest = content_digest(item)
            cached = self._recent.seen(device, item.request_id, digest)
            if cached is None:
                age = self._shedder.ages.age_on_arrival(device, item.sent_at, received)
            elif cached is REUSED:
                digest, entry = b"", self.inference.error(
                    device, item.request_id, E.ID_REUSED, f"request id {item.request_id} is "
                    "still being answered for other features: give every request a new id")
            else:
                self._stats.duplicates += 1
                if cached == PENDING:
                    return  # the pending batch answers it
                self._stats.resent += 1
                entry = cached
        # Flush from inside the callback when the batch is full or nothing more is waiting:
        # paho then writes the replies ahead of this message's PUBACK.
        if self._batch.add((received, reply_to, device, entry, digest, age), received) \
                or not self._readable():
            self._flush()

    def _flush(self) -> None:
        items = self._batch.take()
        if not items:
            return
        self._published += self._backlog.send_if_due(self._readable)
        requests = shed_late(items, self._shedder, self._backlog, self.inference.error)
        started = time.monotonic()
        answers = iter(self.inference.handle_batch(requests) if requests else ())
        self._shedder.record_compute(len(requests), time.monotonic() - started)
        publish, recent = self._client.publish, self._recent
        done_at = time.monotonic()
        service_ms: list[float] = []
        for received, reply_to, device, item, digest, _ in items:
            if isinstance(item, bytes):
                payload = item
            else:
                reply = next(answers) if isinstance(item, InferenceRequest) else item
                payload = encode(reply)
                if digest and reply.request_id is not None:  # only answers are cached
                    if type(reply) is InferenceReply:
                        recent.answered(device, reply.request_id, digest, payload)
                    else:
                        recent.failed(device, reply.request_id, digest)
            publish(reply_to, payload, qos=1)
            service_ms.append((done_at - received) * 1000.0)
        self._published += len(items)
        self._stats.replies += len(items)
        self._stats.record_batch(len(items))
        self._stats.record_service_ms(service_ms)

    def _readable(self) -> bool:
        """More input already waiting on the socket (then keep batching)."""
        sock = self._client.socket()
        if sock is None:
            return False
        if self._tls and sock.pending() > 0:  # type: ignore[attr-defined,union-attr]
            return True
        try:
            return bool(_select([sock], (), (), 0)[0])
        except (OSError, ValueError, TypeError):
            return False

    def _serve(self) -> None:
        client, batch = self._client, self._batch
        next_stats = time.monotonic() + self.stats_every_s
        try:
            while not self._stopping.is_set():
                now = time.monotonic()
                timeout = min(batch.time_left(now), _IDLE_TICK_S, max(0.0, next_stats - now))
                rc = client.loop(timeout)
                if rc != _SUCCESS:
                    self._flush()
                    self._reconnect(rc)
                    continue
                if batch.items and (batch.due(time.monotonic()) or not self._readable()):
                    self._flush()
                if time.monotonic() >= next_stats:
                    self._report()
                    next_stats = time.monotonic() + self.stats_every_s
            self._drain()
        except CloudError as exc:  # the broker keeps refusing us: stop with one clear line
            self.failure = str(exc)
            self.log.error("worker %s stops: %s", self.worker_id, exc)
            client.disconnect()
        except Exception:
            self.log.exception("worker %s crashed; disconnecting", self.worker_id)
            client.disconnect()
            raise

    def _reconnect(self, rc: MQTTErrorCode) -> None:
        """Back off and reconnect; ``BrokerRefused`` after too many refusals in a row."""
        self.log.warning("lost the broker connection (%s); reconnecting", mqtt.error_string(rc))
        if reconnect(self._client, self.address, self._stopping, self.log,
                     max_refusals=self._max_refusals):
            self._subscribe()  # clean session: subscriptions do not survive a reconnect
            self.log.info("reconnected to %s:%d", self.address.host, self.address.port)

    def _drain(self) -> None:
        """Stop taking work: unsubscribe, answer everything received, wait for acks, disconnect."""
        client = self._client
        deadline = time.monotonic() + self._stop_timeout_s
        unsubscribe_mid = None if self._filter is None else \
            client.unsubscribe([self._filter, self.telemetry_topic])[1]
        self._backlog.close()  # its probes no longer come back
        # Messages the broker routed to us before the UNSUBACK still arrive: answer them all,
        # then wait until the input has been quiet for a moment and every reply is acked.
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            received = self._stats.received
            if client.loop(0.01) != _SUCCESS:
                break
            self._flush()
            now = time.monotonic()
            if self._stats.received != received:
                quiet_since = now
            if ((unsubscribe_mid is None or unsubscribe_mid in self._acks)
                    and self._acked >= self._published
                    and now - quiet_since >= _DRAIN_QUIET_S):
                break
        unacked = self._published - self._acked
        self._report()
        client.disconnect()
        for _ in range(10):  # send the DISCONNECT; loop() fails once the socket is closed
            if client.loop(0.01) != _SUCCESS:
                break
        self.log.info("worker %s stopped%s", self.worker_id,
                      f" ({unacked} replies not acknowledged by the broker)" if unacked else "")

    # -- stats -------------------------------------------------------------------------------
    def _snapshot(self, *, reset_window: bool) -> dict[str, float]:
        snap = self._stats.snapshot(self.inference.error_counts, len(self._batch),
                                    reset_window=reset_window)
        snap["uptime_s"] = time.monotonic() - self._started_at if self._started_at else 0.0
        snap["shared_subscription"] = int(self.shared_subscription)
        snap.update(self.telemetry.counters())
        snap["backlog_ms"] = self._backlog.current(time.monotonic()) * 1000.0
        snap["clock_resets"] = self._shedder.ages.clock_resets
        return snap

    def _report(self) -> None:
        snap = self._snapshot(reset_window=True)
        self.log.info("stats %s", log_line(snap))
        try:
            self._client.publish(self.telemetry_topic,
                                 encode(Telemetry(self.worker_id, time.time(), snap)), qos=0)
            self._published += 1  # paho reports QoS 0 publishes to on_publish too
        except (ValueError, OSError) as exc:
            self.log.warning("could not publish stats telemetry: %s", exc)
