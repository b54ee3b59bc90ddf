"""``MqttUplink``: the device's uplink over MQTT 3.1.1 with paho-mqtt 2.

Requests go to ``request_topic(device)`` at QoS 1; replies arrive on ``reply_topic(device)`` and
are matched to the waiting ``exchange`` by request id (one slot per id, removed in ``finally``).
A reply for an id that already had its answer is a duplicate; one for an id whose wait ended
is late; both are counted and dropped. A background thread named ``edge[<device>].mqtt_loop``
runs the network loop and reconnects with jittered exponential backoff. TCP_NODELAY is set on
every socket (paho does not; without it a round trip takes 40-90 ms instead of ~0.3 ms).
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from adaptedge.edge.errors import UplinkConfigError
from adaptedge.protocol.broker_url import split_broker_url
from adaptedge.protocol.codec import decode, encode
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.messages import ErrorReply, InferenceReply, InferenceRequest, Telemetry
from adaptedge.protocol.topics import DEFAULT_PREFIX, reply_topic, request_topic, telemetry_topic

_REMEMBERED_IDS = 4096
log = logging.getLogger("edge.mqtt")


def parse_broker_url(url: str) -> tuple[str, int, bool]:
    """``(host, port, tls)`` of a broker URL (``protocol.broker_url``)."""
    try:
        return split_broker_url(url)
    except ValueError as exc:
        raise UplinkConfigError(str(exc)) from None


class _Slot:
    __slots__ = ("event", "reply")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reply: InferenceReply | ErrorReply | None = None


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

    def __init__(self, broker_url: str, device_id: str, *, username: str | None = None,
                 password: str | None = None, tls: ssl.SSLContext | None = None,
                 prefix: str = DEFAULT_PREFIX, keepalive: int = 30,
                 reconnect_min_s: float = 0.1, reconnect_max_s: float = 5.0,
                 client_id: str | None = None, max_queued: int = 1000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        host, port, wants_tls = parse_broker_url(broker_url)
        if password is not None and username is None:
            raise UplinkConfigError("a password was given without a username")
        if not 0 < reconnect_min_s <= reconnect_max_s:
            raise UplinkConfigError("need 0 < reconnect_min_s <= reconnect_max_s, got "
                                    f"{reconnect_min_s} and {reconnect_max_s}")
        self.host, self.port = host, port
        self.device_id = device_id
        self.request_topic = request_topic(device_id, prefix)
        self.reply_topic = reply_topic(device_id, prefix)
        self.telemetry_topic = telemetry_topic(device_id, prefix)
        self._clock = clock
        self._keepalive = keepalive
        self._backoff = (reconnect_min_s, reconnect_max_s)
        self._pending: dict[int, _Slot] = {}
        self._answered = _RecentIds(_REMEMBERED_IDS)
        self._expired = _RecentIds(_REMEMBERED_IDS)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None
        self._channels: dict[str, Callable[[bytes, bool], None]] = {}  # add_channel
        self._counters: dict[str, float] = {
            "late_replies": 0.0, "duplicate_replies": 0.0, "unknown_replies": 0.0,
            "bad_replies": 0.0, "connects": 0.0, "connect_failures": 0.0, "disconnects": 0.0,
        }
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
        client.on_socket_open = _set_nodelay
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        self._client = client

    # -- Uplink --------------------------------------------------------------------------------
    def is_connected(self) -> bool:
        return bool(self._client.is_connected())

    def exchange(self, request: InferenceRequest,
                 deadline: float) -> InferenceReply | ErrorReply | None:
        rid = request.request_id
        slot = _Slot()
        with self._lock:
            self._pending[rid] = slot
        try:
            info = self._client.publish(self.request_topic, encode(request), qos=1)
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
            self._client.subscribe(topic, qos=1)

    def publish(self, topic: str, payload: bytes, *, qos: int = 0, retain: bool = False) -> bool:
        """Publish raw bytes on one of this device's topics; False when not queued."""
        info = self._client.publish(topic, payload, qos=qos, retain=retain)
        return info.rc == MQTTErrorCode.MQTT_ERR_SUCCESS

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> MqttUplink:
        """Start the network thread; it connects (and reconnects) in the background."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, daemon=True,
                                            name=f"edge[{self.device_id}].mqtt_loop")
            self._thread.start()
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
        thread, self._thread = self._thread, None
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
        first = True
        client = self._client
        # paho's threaded mode (what loop_start does): other threads' publishes only queue the
        # packet and wake this thread, so a single thread ever writes to the socket.
        client._thread = threading.current_thread()
        while not self._stop.is_set():
            try:
                if first:
                    client.connect(self.host, self.port, keepalive=self._keepalive)
                    first = False
                else:
                    client.reconnect()
            except (OSError, ssl.SSLError, ValueError) as exc:
                _close_sockets_of(exc)
                self._counters["connect_failures"] += 1
                self.last_error = f"cannot connect to {self.host}:{self.port}: {exc}"
                self._stop.wait(random.uniform(0.5, 1.0) * delay)
                delay = min(delay * 2, high)
                continue
            while not self._stop.is_set():
                rc = client.loop(timeout=0.05)
                if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                    break
                if client.is_connected():
                    delay = low
            if not self._stop.is_set():
                self._wake_all()
                self._stop.wait(random.uniform(0.5, 1.0) * delay)
                delay = min(delay * 2, high)

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
        client.subscribe(self.reply_topic, qos=1)
        for extra in self._channels:
            client.subscribe(extra, qos=1)

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: Any, reason_code: Any,
                       properties: Any) -> None:
        self._counters["disconnects"] += 1
        self._wake_all()

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        try:
            reply = decode(message.payload)
        except ProtocolError as exc:
            self._counters["bad_replies"] += 1
            log.warning("edge %s: dropped an undecodable reply: %s", self.device_id, exc)
            return
        if not isinstance(reply, InferenceReply | ErrorReply) or reply.request_id is None:
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


def _close_sockets_of(exc: BaseException) -> None:
    """Close sockets a failed connect left open (paho does not close a socket whose TLS
    handshake failed; it would linger until garbage collection)."""
    tb = exc.__traceback__
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, socket.socket) and value.fileno() != -1:
                with contextlib.suppress(OSError):
                    value.close()
        tb = tb.tb_next


def _set_nodelay(client: mqtt.Client, userdata: Any, sock: Any) -> None:
    with contextlib.suppress(OSError, AttributeError):  # not TCP (unix/websocket transports)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
