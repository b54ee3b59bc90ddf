"""Does this broker deliver shared subscriptions? Ask it with one message to ourselves.

Some brokers accept ``$share/<group>/...`` subscriptions but deliver nothing to them (the
embedded amqtt broker): a worker probes before relying on them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

from adaptedge.cloud.transport.connection import Loop
from adaptedge.protocol.codec import encode
from adaptedge.protocol.messages import Telemetry
from adaptedge.protocol.topics import shared

PROBE_TIMEOUT_S: Final = 1.0
_SUCCESS = MQTTErrorCode.MQTT_ERR_SUCCESS


def pump(loop: Loop, seconds: float, done: Callable[[], bool]) -> None:
    """Drive a client's loop in this thread until ``done()`` or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not done() and (left := deadline - time.monotonic()) > 0:
        if loop(min(left, 0.02)) != _SUCCESS:
            return


def probe_shared(client: mqtt.Client, group: str, topic: str, source: str,
                 acks: set[int], *, loop: Loop) -> tuple[bool, int]:
    """Send one message through a shared subscription on ``topic`` (the worker's own
    telemetry topic, which the service account may read and write). Returns whether it
    arrived in time and how many messages were published. ``acks`` collects SUBACK/UNSUBACK
    message ids (the caller's ``on_subscribe``/``on_unsubscribe`` fill it); ``loop`` drives
    the client."""
    got = threading.Event()
    probe_filter = shared(group, topic)
    payload = encode(Telemetry(source, time.time(), {"share_probe": 1}))

    def on_probe(c: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        if message.payload == payload:
            got.set()

    client.message_callback_add(topic, on_probe)
    try:
        rc, mid = client.subscribe(probe_filter, qos=1)
        if rc != _SUCCESS:
            return False, 0
        pump(loop, PROBE_TIMEOUT_S, lambda: mid in acks)
        client.publish(topic, payload, qos=1)
        pump(loop, PROBE_TIMEOUT_S, got.is_set)
        rc, mid = client.unsubscribe(probe_filter)
        pump(loop, PROBE_TIMEOUT_S, lambda: mid in acks)
        return got.is_set(), 1
    finally:
        client.message_callback_remove(topic)
