"""The service core behind an MQTT broker (paho-mqtt 2, MQTT 3.1.1).

One thread owns the paho client and drives it through its public API only (its external-loop
calls, ``mqtt_step.NetworkLoop``; ``publish``; ``ack``), so there is no per-message thread
handoff and paho keeps its own keep-alive clock. Each pass reads everything waiting on the socket into the ``Inbox``
(``mqtt_inbox``), then hands the core up to one batch of it; the core flushes the pending batch
when it is full or when no more input is waiting; the loop flushes a batch whose oldest request
has waited ``max_wait_ms``. A flush is one onnxruntime call and one QoS 1 publish per reply.
Acknowledgements are manual (``manual_ack_set``): a request's PUBACK is sent once the batch
holding it is answered, so it always follows its reply. At most ``MAX_UNACKED_REPLIES``
replies wait for the broker's acknowledgement (paho's message ids are 16-bit); past that the
worker reads but computes nothing more until acknowledgements come. Workers share one group per
request filter when the broker delivers shared subscriptions (probed):
``$share/<group>/<prefix>/v1/+/req/<bundle>`` for each bundle served (a share is its group and
its filter, so each bundle's requests are spread over the workers serving it, never handed to
another) and ``$share/<group>/<prefix>/v1/+/req`` for older devices (``ServiceCore`` forwards
what it does not serve). A connection that keeps dropping soon after it was made (another
client with this client id) is retried after a growing pause (``ReconnectPacer``).

(A hand-written MQTT fast path under paho, which parsed and wrote PUBLISH/PUBACK packets
itself, was removed: it bypassed paho's activity clock, so under a deep backlog paho's
keep-alive closed the worker's own connection and the broker discarded its queue; issue 31.)
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Literal

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.service.core import ServiceCore
from adaptedge.cloud.transport.connection import (
    BrokerAddress,
    ReconnectPacer,
    TlsFiles,
    connect,
    make_client,
    reconnect,
)
from adaptedge.cloud.transport.mqtt_inbox import Inbox
from adaptedge.cloud.transport.mqtt_step import NetworkLoop
from adaptedge.cloud.transport.sharing import probe_shared, pump
from adaptedge.protocol import errors as E
from adaptedge.protocol.topics import shared

ShareMode = Literal["auto", "on", "off"]
_SUCCESS = MQTTErrorCode.MQTT_ERR_SUCCESS
_IDLE_TICK_S = 0.05
_DRAIN_QUIET_S = 0.1
_SUBACK_TIMEOUT_S = 10.0
_MAX_READS = 10_000
"""Loop passes in a row while the socket stays readable (bounded)."""
MAX_UNACKED_REPLIES = 16_384
"""Replies handed to paho and not yet acknowledged by the broker, at most (ids are 16-bit)."""


class MqttTransport:
    """Connects, subscribes (shared or plain), runs the loop, reconnects, drains."""

    def __init__(self, core: ServiceCore, address: BrokerAddress, *, group: str | None,
                 share: ShareMode, username: str | None, password: str | None,
                 tls: TlsFiles | None, stats_every_s: float, max_refusals: int,
                 logger: logging.Logger) -> None:
        self.core, self.address, self.group, self.share_mode = core, address, group, share
        self.log = logger
        self.stats_every_s = stats_every_s
        self._max_refusals = max_refusals
        self._tls = tls is not None or address.tls
        self.client = make_client(core.worker_id, username=username, password=password,
                                  tls=tls, use_tls=self._tls)
        self._inbox = Inbox()
        self.client.on_message = self._inbox.put
        self.client.on_connect = self._on_connect
        self.client.on_publish = self._on_publish
        self.client.on_subscribe = self._on_subscribe_ack
        self.client.on_unsubscribe = self._on_subscribe_ack
        core.bind(self, self.readable)
        self._filters: list[str] = []
        self.shared_subscription = False
        self.acked = 0
        """Publishes the broker has acknowledged."""
        self._acks: set[int] = set()
        self._pacer = ReconnectPacer()
        self.disconnects = 0
        self._net = NetworkLoop(self.client)
        self._step, self._input_waiting = self._net.step, self._net.readable

    @property
    def description(self) -> str:
        kind = "shared" if self.shared_subscription else "plain"
        return f"{kind} subscriptions {', '.join(self._filters)}"

    def open(self) -> None:
        """Connect, pick shared or plain subscription, subscribe (``CloudError`` if refused)."""
        connect(self.client, self.address, loop=self._step)
        try:
            self.shared_subscription = self._choose_sharing()
            self._filters = [shared(self.group, f)  # type: ignore[arg-type]
                             if self.shared_subscription else f
                             for f in self.core.request_filters]
            mid = self._subscribe()
            # Ready means subscribed: a request sent after start() returns is not lost to a
            # SUBSCRIBE the broker has not processed yet.
            pump(self._step, _SUBACK_TIMEOUT_S, lambda: mid is None or mid in self._acks)
            if mid is not None and mid not in self._acks:
                raise CloudError(f"the broker did not acknowledge the subscriptions to "
                                 f"{', '.join(self._filters)} within {_SUBACK_TIMEOUT_S:g} s")
            # From now on a PUBACK follows its request's reply (the probe's callback is done).
            self.client.manual_ack_set(True)
            self._pacer.connected(time.monotonic())
        except BaseException:
            self.client.disconnect()
            raise

    def close(self) -> None:
        self.client.disconnect()

    def publish(self, topic: str, payload: bytes, qos: int = 0) -> None:
        """The core's wire."""
        self.client.publish(topic, payload, qos=qos)

    def readable(self) -> bool:
        """More input already waiting, read or on the socket (then keep batching)."""
        return bool(self._inbox) or self._input_waiting()

    def _ack_answered(self) -> None:
        """Send the PUBACKs of the messages taken so far once their replies are out."""
        if self._inbox.owes and not self.core.batch.items:
            self._inbox.settle(self.client.ack)

    def _read_waiting(self) -> MQTTErrorCode:
        """Read what the socket holds into the inbox (bounded), so the stream holds no backlog
        and the broker's acknowledgements of our replies are not queued behind one."""
        for _ in range(_MAX_READS):
            if not self._input_waiting():
                break
            rc = self._step(0.0)
            if rc != _SUCCESS:
                return rc
        return _SUCCESS

    def _may_feed(self) -> bool:
        """Fewer than ``MAX_UNACKED_REPLIES`` replies wait for the broker's acknowledgement."""
        return self.core.published - self.acked < MAX_UNACKED_REPLIES

    def _feed(self, limit: int) -> None:
        """Hand the core up to ``limit`` messages from the inbox, oldest first, while fewer
        than ``MAX_UNACKED_REPLIES`` replies wait for the broker. The core receives a message
        now: its time in the inbox counts as queueing, like its time in the broker (the
        per-device delay and the backlog probe, which queues here too, both see it)."""
        inbox, core = self._inbox, self.core
        for _ in range(min(limit, len(inbox))):
            if not self._may_feed():
                return
            item = inbox.take()
            if item.topic is None:
                self._bad_topic()
            else:
                core.on_message(item.topic, item.payload, time.monotonic(),
                                retained=item.retained)
            self._ack_answered()

    def extra_stats(self) -> dict[str, float]:
        return {"shared_subscription": int(self.shared_subscription), "inbox": len(self._inbox),
                "disconnects": self.disconnects}

    # -- subscription ------------------------------------------------------------------------
    def _choose_sharing(self) -> bool:
        if self.share_mode == "off":
            return False
        if self.share_mode == "on":
            return True
        works, published = probe_shared(self.client, self.group or "adaptedge",
                                        self.core.telemetry_topic, self.core.worker_id,
                                        self._acks, loop=self._step)
        self.core.published += published
        self.log.info("broker %s shared subscriptions ($share/%s/...): %s",
                      "delivers" if works else "does NOT deliver", self.group,
                      "using them" if works else "falling back to a plain subscription")
        return works

    def _subscribe(self) -> int | None:
        """Subscribe to requests, probes and telemetry; the request subscription's message id."""
        mid = None
        if self._filters:
            mid = self.client.subscribe([(f, 1) for f in self._filters])[1]
            self.client.subscribe(self.core.telemetry_topic, qos=1)  # backlog probes return
        telemetry = self.core.telemetry_filter
        if telemetry is not None:
            self.client.subscribe(shared(self.group, telemetry)  # type: ignore[arg-type]
                                  if self.shared_subscription else telemetry, qos=0)
        return mid

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
        self.acked += 1

    def _bad_topic(self) -> None:
        self.core.stats.received += 1
        self.core.inference.error_counts[E.BAD_TOPIC] += 1

    # -- the loop ----------------------------------------------------------------------------
    def serve(self, stopping: threading.Event, stop_timeout_s: float) -> None:
        """Serve until ``stopping`` is set, then drain; ``CloudError`` if the broker keeps
        refusing us (the caller reports it)."""
        batch, core = self.core.batch, self.core
        next_stats = time.monotonic() + self.stats_every_s
        while not stopping.is_set():
            now = time.monotonic()
            timeout = 0.0 if self._inbox and self._may_feed() else \
                min(batch.time_left(now), _IDLE_TICK_S, max(0.0, next_stats - now))
            rc = self._step(timeout)
            if rc == _SUCCESS:
                rc = self._read_waiting()
            if rc != _SUCCESS:
                core.flush()
                self._reconnect(rc, stopping)
                continue
            self._feed(batch.max_batch)
            if batch.items and (batch.due(time.monotonic()) or not self.readable()):
                core.flush()
                self._ack_answered()
            if time.monotonic() >= next_stats:
                core.report(self.extra_stats())
                next_stats = time.monotonic() + self.stats_every_s
        self._drain(stop_timeout_s)

    def _reconnect(self, rc: MQTTErrorCode, stopping: threading.Event) -> None:
        """Back off and reconnect; ``BrokerRefused`` after too many refusals in a row."""
        self.log.warning("lost the broker connection (%s); reconnecting", mqtt.error_string(rc))
        self.disconnects += 1
        self._inbox.reconnected()  # their PUBACKs were for the lost connection
        pause = self._pacer.lost(time.monotonic())
        if pause > 0:
            self.log.warning("the connection dropped %d times soon after connecting: another "
                             "client probably uses this worker's client id (or, with mosquitto's "
                             "use_username_as_clientid, its account): give every worker its own "
                             "account (cloud acl --workers N); waiting %.1f s",
                             self._pacer.early_drops, pause)
            stopping.wait(pause)
        if reconnect(self.client, self.address, stopping, self.log,
                     max_refusals=self._max_refusals, loop=self._step):
            self._pacer.connected(time.monotonic())
            self._subscribe()  # clean session: subscriptions do not survive a reconnect
            self.log.info("reconnected to %s:%d", self.address.host, self.address.port)

    def _drain(self, timeout_s: float) -> None:
        """Stop taking work: unsubscribe, answer everything received, wait for acks, disconnect."""
        client, core = self.client, self.core
        deadline = time.monotonic() + timeout_s
        unsubscribe_mid = None if not self._filters else \
            client.unsubscribe([*self._filters, core.telemetry_topic])[1]
        if core.backlog is not None:
            core.backlog.close()  # its probes no longer come back
        # Messages the broker routed to us before the UNSUBACK still arrive: answer them all,
        # then wait until the input has been quiet for a moment and every reply is acked.
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            received = core.stats.received
            if self._step(0.0 if self._inbox else 0.01) != _SUCCESS \
                    or self._read_waiting() != _SUCCESS:
                break
            self._feed(len(self._inbox))
            core.flush()
            self._ack_answered()
            now = time.monotonic()
            if core.stats.received != received:
                quiet_since = now
            if (not self._inbox and (unsubscribe_mid is None or unsubscribe_mid in self._acks)
                    and self.acked >= core.published
                    and now - quiet_since >= _DRAIN_QUIET_S):
                break
        unacked = core.published - self.acked
        core.report(self.extra_stats())
        client.disconnect()
        for _ in range(10):  # send the DISCONNECT; loop() fails once the socket is closed
            if self._step(0.01) != _SUCCESS:
                break
        self.log.info("worker %s stopped%s", core.worker_id,
                      f" ({unacked} replies not acknowledged by the broker)" if unacked else "")
