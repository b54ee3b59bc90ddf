"""The service core behind an MQTT broker (paho-mqtt 2, MQTT 3.1.1).

One thread owns the paho client and drives its loop by hand (``mqtt_loop.LoopDriver``), so
there is no per-message thread handoff. Once subscribed, request PUBLISH packets take the
driver's fast path (parsed off the buffer, ``_deliver``) instead of paho's per-message
objects; the core flushes the pending batch when it is full or when no more input is waiting,
and the loop flushes a batch whose oldest request has waited ``max_wait_ms``. A flush is one
onnxruntime call and one QoS 1 publish per reply; a request's PUBACK is held until the batch
holding it is answered, so it always follows the reply. A burst of requests is one ``recv``
and its replies and PUBACKs leave in one ``send`` (plain TCP; TLS sockets are left to ``ssl``
and take paho's own path). Workers share one group per request filter when the broker
delivers shared subscriptions (probed): ``$share/<group>/<prefix>/v1/+/req/<bundle>`` for each
bundle served (a share is its group and its filter, so each bundle's requests are spread over
the workers serving it, never handed to another) and ``$share/<group>/<prefix>/v1/+/req`` for
older devices (``ServiceCore`` forwards what it does not serve).
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
from adaptedge.cloud.transport.mqtt_framing import Publish
from adaptedge.cloud.transport.mqtt_loop import LoopDriver
from adaptedge.cloud.transport.sharing import probe_shared, pump
from adaptedge.protocol import errors as E
from adaptedge.protocol.topics import shared

ShareMode = Literal["auto", "on", "off"]
_SUCCESS = MQTTErrorCode.MQTT_ERR_SUCCESS
_IDLE_TICK_S = 0.05
_DRAIN_QUIET_S = 0.1
_SUBACK_TIMEOUT_S = 10.0


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
        self.client.on_message = self._on_message
        self.client.on_connect = self._on_connect
        self.client.on_publish = self._on_publish
        self.client.on_subscribe = self._on_subscribe_ack
        self.client.on_unsubscribe = self._on_subscribe_ack
        # A request's PUBACK leaves once it is answered (the batch is empty).
        self._loop = LoopDriver(self.client, buffered=not self._tls,
                                acks_due=lambda: not core.batch.items)
        core.bind(self, self._loop.readable)
        self._filters: list[str] = []
        self.shared_subscription = False
        self._acked = 0
        self._acks: set[int] = set()
        self._pacer = ReconnectPacer()

    @property
    def description(self) -> str:
        kind = "shared" if self.shared_subscription else "plain"
        return f"{kind} subscriptions {', '.join(self._filters)}"

    def open(self) -> None:
        """Connect, pick shared or plain subscription, subscribe (``CloudError`` if refused)."""
        connect(self.client, self.address, loop=self._loop.step)
        try:
            self.shared_subscription = self._choose_sharing()
            self._filters = [shared(self.group, f)  # type: ignore[arg-type]
                             if self.shared_subscription else f
                             for f in self.core.request_filters]
            mid = self._subscribe()
            # Ready means subscribed: a request sent after start() returns is not lost to a
            # SUBSCRIBE the broker has not processed yet.
            pump(self._loop.step, _SUBACK_TIMEOUT_S, lambda: mid is None or mid in self._acks)
            if mid is not None and mid not in self._acks:
                raise CloudError(f"the broker did not acknowledge the subscriptions to "
                                 f"{', '.join(self._filters)} within {_SUBACK_TIMEOUT_S:g} s")
            self._loop.deliver = self._deliver  # the probe's callback is done with
            self._pacer.connected(time.monotonic())
        except BaseException:
            self.client.disconnect()
            raise

    def close(self) -> None:
        self.client.disconnect()

    def publish(self, topic: str, payload: bytes, qos: int = 0) -> None:
        """The core's wire: QoS 1 through the loop's outbox on the fast path, else paho."""
        if qos != 1 or not self._loop.publish(topic, payload):
            self.client.publish(topic, payload, qos=qos)

    @property
    def acked(self) -> int:
        """Publishes the broker has acknowledged (paho's and the outbox's)."""
        return self._acked + self._loop.outbox.acked

    def extra_stats(self) -> dict[str, float]:
        return {"shared_subscription": int(self.shared_subscription)}

    # -- subscription ------------------------------------------------------------------------
    def _choose_sharing(self) -> bool:
        if self.share_mode == "off":
            return False
        if self.share_mode == "on":
            return True
        works, published = probe_shared(self.client, self.group or "adaptedge",
                                        self.core.telemetry_topic, self.core.worker_id,
                                        self._acks, loop=self._loop.step)
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
        self._acked += 1

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        try:
            topic = message.topic
        except UnicodeDecodeError:  # paho raises on a topic that is not UTF-8
            self._bad_topic()
            return
        self.core.on_message(topic, message.payload, message.timestamp, retained=message.retain)

    def _deliver(self, packet: Publish, received: float) -> None:
        """The fast path's PUBLISH (``mqtt_loop.LoopDriver.deliver``): as ``_on_message``."""
        try:
            topic = packet.topic.decode()
        except UnicodeDecodeError:
            self._bad_topic()
            return
        self.core.on_message(topic, packet.payload, received, retained=packet.retain)

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
            timeout = min(batch.time_left(now), _IDLE_TICK_S, max(0.0, next_stats - now))
            rc = self._loop.step(timeout)
            if rc != _SUCCESS:
                core.flush()
                self._reconnect(rc, stopping)
                continue
            if batch.items and (batch.due(time.monotonic()) or not self._loop.readable()):
                core.flush()
            if time.monotonic() >= next_stats:
                core.report(self.extra_stats())
                next_stats = time.monotonic() + self.stats_every_s
        self._drain(stop_timeout_s)

    def _reconnect(self, rc: MQTTErrorCode, stopping: threading.Event) -> None:
        """Back off and reconnect; ``BrokerRefused`` after too many refusals in a row."""
        self.log.warning("lost the broker connection (%s); reconnecting", mqtt.error_string(rc))
        pause = self._pacer.lost(time.monotonic())
        if pause > 0:
            self.log.warning("the connection dropped %d times soon after connecting: another "
                             "client probably uses this worker's client id (or, with mosquitto's "
                             "use_username_as_clientid, its account): give every worker its own "
                             "account (cloud acl --workers N); waiting %.1f s",
                             self._pacer.early_drops, pause)
            stopping.wait(pause)
        if reconnect(self.client, self.address, stopping, self.log,
                     max_refusals=self._max_refusals, loop=self._loop.step):
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
            if self._loop.step(0.01) != _SUCCESS:
                break
            core.flush()
            now = time.monotonic()
            if core.stats.received != received:
                quiet_since = now
            if ((unsubscribe_mid is None or unsubscribe_mid in self._acks)
                    and self.acked >= core.published
                    and now - quiet_since >= _DRAIN_QUIET_S):
                break
        unacked = core.published - self.acked
        core.report(self.extra_stats())
        client.disconnect()
        for _ in range(10):  # send the DISCONNECT; loop() fails once the socket is closed
            if self._loop.step(0.01) != _SUCCESS:
                break
        self.log.info("worker %s stopped%s", core.worker_id,
                      f" ({unacked} replies not acknowledged by the broker)" if unacked else "")
