"""A minimal device-side requester for smoke tests, benchmarks and operations checks.

Not the edge runtime (that is ``edge``): it publishes raw payloads on a device's request
topic and records every reply by request id, driving paho's loop in the calling thread (no
background thread, so round-trip timings carry no thread handoff).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.transport.connection import TlsFiles, connect, make_client, parse_broker_url
from adaptedge.protocol.codec import decode
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.messages import Message, Telemetry
from adaptedge.protocol.topics import DEFAULT_PREFIX, reply_topic, request_topic

ReplyHandler = Callable[[Message, float], None]


class RequestClient:
    """Publishes on ``<prefix>/v1/<device>/req`` and collects replies from ``.../resp``."""

    def __init__(self, broker_url: str, device: str, *, prefix: str = DEFAULT_PREFIX,
                 username: str | None = None, password: str | None = None,
                 tls: TlsFiles | None = None, client_id: str | None = None) -> None:
        self.address = parse_broker_url(broker_url)
        self.device = device
        self.request_topic = request_topic(device, prefix)
        self.reply_topic = reply_topic(device, prefix)
        self.client = make_client(client_id or f"{device}-requester", username=username,
                                  password=password, tls=tls, use_tls=self.address.tls)
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe
        self.replies: dict[int | None, list[tuple[float, Message]]] = {}
        self.undecodable = 0
        self.on_reply: ReplyHandler | None = None
        self._granted: list[Any] | None = None

    def connect(self, *, subscribe: bool = True, timeout_s: float = 5.0, qos: int = 1) -> None:
        connect(self.client, self.address)
        if subscribe:
            granted = self.subscribe(self.reply_topic, timeout_s=timeout_s, qos=qos)
            if any(code.is_failure for code in granted):
                raise CloudError(f"the broker refused the subscription to {self.reply_topic}")

    def subscribe(self, topic_filter: str, *, timeout_s: float = 5.0,
                  qos: int = 1) -> list[Any]:
        """Subscribe (QoS 1, or 0 for a NATS MQTT listener) and wait for the SUBACK; returns
        the granted reason codes."""
        self._granted = None
        self.client.subscribe(topic_filter, qos=qos)
        self.pump(timeout_s, lambda: self._granted is not None)
        if self._granted is None:
            raise CloudError(f"no SUBACK for {topic_filter} within {timeout_s:g} s")
        return self._granted

    def send(self, payload: bytes, *, topic: str | None = None, qos: int = 1) -> None:
        info = self.client.publish(topic or self.request_topic, payload, qos=qos)
        if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS,):
            raise CloudError(f"publish failed: {mqtt.error_string(info.rc)}")

    def pump(self, seconds: float, until: Callable[[], bool] | None = None) -> bool:
        """Process network traffic for up to ``seconds``; True if ``until()`` became true."""
        deadline = time.monotonic() + seconds
        while True:
            if until is not None and until():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            rc = self.client.loop(min(left, 0.05))
            if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                raise CloudError(f"connection lost: {mqtt.error_string(rc)}")

    def close(self) -> None:
        self.client.disconnect()
        for _ in range(5):
            if self.client.loop(0.01) != MQTTErrorCode.MQTT_ERR_SUCCESS:
                break

    def answered(self, request_id: int) -> bool:
        return request_id in self.replies

    def _on_subscribe(self, client: mqtt.Client, userdata: Any, mid: int, granted: list[Any],
                      props: Any) -> None:
        self._granted = list(granted)

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        now = time.perf_counter()
        try:
            reply = decode(message.payload)
        except ProtocolError:
            self.undecodable += 1
            return
        # Replies and errors carry the request id; so does a request echoed back verbatim.
        rid = None if isinstance(reply, Telemetry) else reply.request_id
        self.replies.setdefault(rid, []).append((now, reply))
        if self.on_reply is not None:
            self.on_reply(reply, now)
