"""``MqttUplink``: the device's uplink over MQTT 3.1.1 with paho-mqtt 2.

Requests go to ``request_topic(device, bundle_id=...)`` (bundle-scoped: the broker hands them
only to workers serving that bundle) at QoS 1; replies arrive on ``reply_topic(device)`` and
are matched to the waiting ``exchange`` by request id (one slot per id, removed in ``finally``).
A reply for an id that already had its answer is a duplicate; one for an id whose wait ended
is late; both are counted and dropped. A background thread named ``edge[<device>].mqtt_loop``
runs the network loop and reconnects with jittered exponential backoff. TCP_NODELAY is set on
every socket (paho does not; without it a round trip takes 40-90 ms instead of ~0.3 ms).

Failover: ``broker_url`` may list several brokers (``mqtt://a:1883,mqtt://b:1883``, e.g. the
MQTT listeners of a NATS cluster's nodes). When the connection is lost the uplink moves to the
next one at once (backing off only after a whole round failed), subscribes again and resends
every request still inside its deadline whose reply has not come (at QoS 1 paho itself
resends the ones the lost broker never acknowledged); the waits go on meanwhile. With a single broker a
lost connection ends the waits at once (the decisions degrade without waiting). The reply
subscription asks for QoS 1 and falls back to QoS 0 when refused: a NATS server refuses a
QoS 1 subscription to an account without subscribe permission on its internal
``$MQTT.sub.>`` subjects, which the fleet's ACL does not grant (it would let a device read
other sessions' deliveries), and replies published by NATS workers arrive at QoS 0 anyway.
``qos=0`` (requests and reply subscription) suits a NATS cluster's MQTT listeners:
nats-server 2.9 stores every QoS 1 publish in a replicated JetStream stream before its
PUBACK and backs a QoS 1 subscription with a JetStream consumer, so each costs a replicated
write and stalls for seconds (4 s timeouts, seen) while a stream leader on a dead node is
re-elected; the worker hop is at-most-once core NATS anyway, and the deadline bounds every
wait.
"""

from __future__ import annotations

import contextlib
import logging
import random
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from adaptedge.edge.errors import UplinkConfigError
from adaptedge.edge.mqtt_links import (
    acknowledged,
    close_sockets_of,
    parse_broker_urls,
    set_nodelay,
    write_queued,
)
from adaptedge.protocol.codec import decode, encode
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.messages import (
    ErrorReply,
    InferenceReply,
    InferenceRequest,
    Reply,
    Telemetry,
    ValueReply,
)
from adaptedge.protocol.topics import DEFAULT_PREFIX, reply_topic, request_topic, telemetry_topic

_REMEMBERED_IDS = 4096
log = logging.getLogger("edge.mqtt")


class _Slot:
    __slots__ = ("deadline", "event", "info", "payload", "reply", "topic")

    def __init__(self, topic: str, payload: bytes, deadline: float) -> None:
        self.event = threading.Event()
        self.reply: Reply | None = None
        self.topic, self.payload, self.deadline = topic, payload, deadline
        self.info: mqtt.MQTTMessageInfo | None = None


class _RecentIds:
    """A bounded set of request ids, oldest forgotten first."""

    def __init__(self, size: int) -> None:
        self._ids: OrderedDict[int, None] = OrderedDict()
        self._size = size

    def add(self, rid: int) -> None:
        self._ids[rid] = None
        if len(self._ids) > self._size:
            self._ids.popitem(last=False)

    def __contains__(self, rid: object) -> bool:
        return rid in self._ids


class MqttUplink:
    """An ``edge.Uplink`` over an MQTT broker. Call ``start()`` (or use ``with``), then
    hand it to ``EdgeRuntime.load(..., uplink=...)``."""

    def __init__(self, broker_url: str | Sequence[str], device_id: str, *, username: str | None = None,
                 password: str | None = None, tls: ssl.SSLContext | None = None,
                 prefix: str = DEFAULT_PREFIX, keepalive: int = 30,
                 connack_timeout_s: float = 2.0,
                 reconnect_min_s: float = 0.1, reconnect_max_s: float = 5.0,
                 client_id: str | None = None, max_queued: int = 1000,
                 qos: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.brokers = parse_broker_urls(broker_url)
        host, port, wants_tls = self.brokers[0]
        if qos not in (0, 1):
            raise UplinkConfigError(f"qos must be 0 or 1, got {qos}")
        self.qos = qos
        """QoS of the requests and of the reply subscription."""
        if password is not None and username is None:
            raise UplinkConfigError("a password was given without a username")
        if not 0 < reconnect_min_s <= reconnect_max_s:
            raise UplinkConfigError("need 0 < reconnect_min_s <= reconnect_max_s, got "
                                    f"{reconnect_min_s} and {reconnect_max_s}")
        self.host, self.port = host, port
        """The broker in use (or being tried)."""
        self.device_id = device_id
        self.prefix = prefix
        self.reply_topic = reply_topic(device_id, prefix)
        self.telemetry_topic = telemetry_topic(device_id, prefix)
        self._clock = clock
        self._keepalive = keepalive
        self._connack_timeout_s = connack_timeout_s
        self._backoff = (reconnect_min_s, reconnect_max_s)
        self._pending: dict[int, _Slot] = {}
        self._answered = _RecentIds(_REMEMBERED_IDS)
        self._expired = _RecentIds(_REMEMBERED_IDS)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._runner: threading.Thread | None = None
        self.last_error: str | None = None
        self._channels: dict[str, Callable[[bytes, bool], None]] = {}  # add_channel
        self._counters: dict[str, float] = {
            "late_replies": 0.0, "duplicate_replies": 0.0, "unknown_replies": 0.0,
            "bad_replies": 0.0, "connects": 0.0, "connect_failures": 0.0, "disconnects": 0.0,
            "failovers": 0.0, "resent": 0.0, "reply_qos0": 0.0,
        }
        self._reply_sub_mid: int | None = None
        self._reply_qos = 1
        client = mqtt.Client(CallbackAPIVersion.VERSION2,
                             client_id=client_id or f"adaptedge-edge-{device_id}",
                             protocol=mqtt.MQTTv311, clean_session=True)
        if username is not None:
            client.username_pw_set(username, password)
        if tls is not None:
            client.tls_set_context(tls)
        elif wants_tls:
            client.tls_set_context(ssl.create_default_context())
        # Bounded: while a frozen broker holds acks back, requests past the bound fail at once
        # (the decision degrades) instead of queueing without limit.
        client.max_queued_messages_set(max_queued)
        client.on_socket_open = set_nodelay
        # With a write-registration callback (paho's public external-loop hook) a publish from
        # another thread only queues its packet and wakes ``client.loop`` in the network thread
        # (its socketpair), so a single thread ever writes to the socket, as with loop_start.
        client.on_socket_register_write = write_queued
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        self._client = client

    # -- Uplink --------------------------------------------------------------------------------
    def is_connected(self) -> bool:
        return bool(self._client.is_connected())

    def exchange(self, request: InferenceRequest, deadline: float) -> Reply | None:
        rid = request.request_id
        slot = _Slot(request_topic(self.device_id, self.prefix, request.bundle_id),
                     encode(request), deadline)
        with self._lock:
            self._pending[rid] = slot
        try:
            info = slot.info = self._client.publish(slot.topic, slot.payload,
                                                    qos=self.qos)
            if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                return None
            remaining = deadline - self._clock()
            if remaining > 0:
                slot.event.wait(remaining)
            return slot.reply
        finally:
            with self._lock:
                del self._pending[rid]
                if slot.reply is None:
                    self._expired.add(rid)

    @property
    def counters(self) -> Mapping[str, float]:
        return dict(self._counters)

    def publish_telemetry(self, counters: Mapping[str, float]) -> bool:
        """Publish a ``Telemetry`` message (QoS 0); False when not connected."""
        if not self.is_connected():
            return False
        message = Telemetry(source=self.device_id, sent_at=time.time(),
                            counters={k: float(v) for k, v in counters.items()})
        info = self._client.publish(self.telemetry_topic, encode(message), qos=0)
        return info.rc == MQTTErrorCode.MQTT_ERR_SUCCESS

    def add_channel(self, topic: str, on_payload: Callable[[bytes, bool], None]) -> None:
        """Also receive ``topic`` (subscribed on every connect): ``on_payload(payload, retained)``
        runs on the network thread. ``edge.updates`` takes its announcements and chunks here."""
        self._channels[topic] = on_payload
        self._client.message_callback_add(topic, lambda c, u, m: on_payload(bytes(m.payload), m.retain))
        if self.is_connected():
            self._client.subscribe(topic, qos=self.qos)

    def publish(self, topic: str, payload: bytes, *, qos: int = 0, retain: bool = False) -> bool:
        """Publish raw bytes on one of this device's topics; False when not queued."""
        info = self._client.publish(topic, payload, qos=qos, retain=retain)
        return info.rc == MQTTErrorCode.MQTT_ERR_SUCCESS

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> MqttUplink:
        """Start the network thread; it connects (and reconnects) in the background."""
        if self._runner is None:
            self._stop.clear()
            self._runner = threading.Thread(target=self._loop, daemon=True,
                                            name=f"edge[{self.device_id}].mqtt_loop")
            self._runner.start()
        return self

    def wait_connected(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.is_connected():
                return True
            time.sleep(0.01)
        return self.is_connected()

    def close(self) -> None:
        self._stop.set()
        thread, self._runner = self._runner, None
        if thread is not None:
            thread.join(timeout=5)
        with contextlib.suppress(Exception):  # already gone
            self._client.disconnect()
        self._wake_all()

    def __enter__(self) -> MqttUplink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- network thread ------------------------------------------------------------------------
    def _loop(self) -> None:
        low, high = self._backoff
        delay = low
        index, failed_in_round = 0, 0
        client = self._client
        while not self._stop.is_set():
            self.host, self.port, _ = self.brokers[index]
            try:
                client.connect(self.host, self.port, keepalive=self._keepalive)
            except (OSError, ssl.SSLError, ValueError) as exc:
                close_sockets_of(exc)
                self._counters["connect_failures"] += 1
                self.last_error = f"cannot connect to {self.host}:{self.port}: {exc}"
                index, failed_in_round = (index + 1) % len(self.brokers), failed_in_round + 1
                if failed_in_round >= len(self.brokers):  # a whole round failed: back off
                    failed_in_round = 0
                    self._stop.wait(random.uniform(0.5, 1.0) * delay)
                    delay = min(delay * 2, high)
                continue
            if self._run_connection(client):
                delay, failed_in_round = low, 0
            if self._stop.is_set():
                break
            if len(self.brokers) == 1:  # nowhere else to go: degrade now, retry after a pause
                self._wake_all()
                self._stop.wait(random.uniform(0.5, 1.0) * delay)
                delay = min(delay * 2, high)
            else:  # fail over to the next broker at once; the waits go on
                self._counters["failovers"] += 1
                index = (index + 1) % len(self.brokers)
                failed_in_round += 1

    def _run_connection(self, client: mqtt.Client) -> bool:
        """Drive the loop until the connection ends or ``close()``; True if it was accepted.
        A CONNACK that does not come within ``connack_timeout_s`` ends the attempt (a NATS
        node whose JetStream is re-electing a leader holds a CONNECT for 4 s, then refuses)."""
        started, accepted = time.monotonic(), False
        while not self._stop.is_set():
            if client.loop(timeout=0.05) != MQTTErrorCode.MQTT_ERR_SUCCESS:
                break
            if client.is_connected():
                accepted = True
            elif not accepted and time.monotonic() - started > self._connack_timeout_s:
                self._counters["connect_failures"] += 1
                self.last_error = (f"no CONNACK from {self.host}:{self.port} within "
                                   f"{self._connack_timeout_s:g} s")
                with contextlib.suppress(Exception):
                    client.disconnect()
                    client.loop(timeout=0.01)
                break
        return accepted

    def _wake_all(self) -> None:
        with self._lock:
            slots = list(self._pending.values())
        for slot in slots:
            slot.event.set()

    # -- paho callbacks (network thread) -------------------------------------------------------
    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, reason_code: Any,
                    properties: Any) -> None:
        if getattr(reason_code, "is_failure", False):
            self._counters["connect_failures"] += 1
            self.last_error = f"broker refused the connection: {reason_code}"
            log.warning("edge %s: %s", self.device_id, self.last_error)
            return
        self._counters["connects"] += 1
        self.last_error = None
        self._reply_qos = self.qos
        self._reply_sub_mid = client.subscribe(self.reply_topic, qos=self.qos)[1]
        for extra in self._channels:
            client.subscribe(extra, qos=self.qos)

    def _on_subscribe(self, client: mqtt.Client, userdata: Any, mid: int, reason_codes: Any,
                      properties: Any) -> None:
        if mid != self._reply_sub_mid:
            return
        if any(getattr(code, "is_failure", False) for code in reason_codes):
            if self._reply_qos == 1:  # e.g. NATS without $MQTT.sub permission: try QoS 0
                self._reply_qos = 0
                self._counters["reply_qos0"] += 1
                self._reply_sub_mid = client.subscribe(self.reply_topic, qos=0)[1]
                return
            self.last_error = f"the broker refused the reply subscription {self.reply_topic}"
            log.warning("edge %s: %s", self.device_id, self.last_error)
        self._resend()

    def _resend(self) -> None:
        """After a (re)subscription: publish again what is still inside its deadline and
        unanswered: at QoS 1 what the lost broker acknowledged (paho resends the rest itself),
        at QoS 0 all of it."""
        now = self._clock()
        with self._lock:
            slots = [s for s in self._pending.values() if s.reply is None and s.deadline > now
                     and (self.qos == 0 or acknowledged(s.info))]
        for slot in slots:
            slot.info = self._client.publish(slot.topic, slot.payload,
                                             qos=self.qos)
            self._counters["resent"] += 1

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: Any, reason_code: Any,
                       properties: Any) -> None:
        self._counters["disconnects"] += 1
        if len(self.brokers) == 1:
            self._wake_all()

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        try:
            reply = decode(message.payload)
        except ProtocolError as exc:
            self._counters["bad_replies"] += 1
            log.warning("edge %s: dropped an undecodable reply: %s", self.device_id, exc)
            return
        if (not isinstance(reply, InferenceReply | ValueReply | ErrorReply)
                or reply.request_id is None):
            self._counters["bad_replies"] += 1
            return
        rid = reply.request_id
        with self._lock:
            slot = self._pending.get(rid)
            if slot is not None and slot.reply is None and not slot.event.is_set():
                slot.reply = reply
                self._answered.add(rid)
                slot.event.set()
                return
            if rid in self._answered or (slot is not None and slot.reply is not None):
                self._counters["duplicate_replies"] += 1
            elif rid in self._expired or slot is not None:
                self._counters["late_replies"] += 1
            else:
                self._counters["unknown_replies"] += 1
