"""Stand-ins for the cloud in edge tests: an in-process uplink and a tiny MQTT responder, both
answering with the bundle's HPC through the reference walk."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from adaptedge.protocol.messages import ErrorReply, InferenceReply, InferenceRequest
from tests.support.reference_walk import ReferenceWalk


class HpcUplink:
    """An in-process uplink answering with the bundle's HPC (or a scripted behaviour)."""

    def __init__(self, reference: ReferenceWalk, *, connected: bool = True,
                 behaviour: Callable[[InferenceRequest], InferenceReply | ErrorReply | None]
                 | None = None) -> None:
        self.reference = reference
        self.connected = connected
        self.behaviour = behaviour
        self.requests: list[InferenceRequest] = []

    def is_connected(self) -> bool:
        return self.connected

    def exchange(self, request: InferenceRequest,
                 deadline: float) -> InferenceReply | ErrorReply | None:
        self.requests.append(request)
        if self.behaviour is not None:
            return self.behaviour(request)
        return hpc_reply(self.reference, request)


def hpc_reply(reference: ReferenceWalk, request: InferenceRequest) -> InferenceReply:
    proba = reference.hpc(request.feature_array() * request.mask_array())
    return InferenceReply(request.request_id, request.device, request.bundle_id,
                          int(np.argmax(proba)), proba.astype("<f4").tobytes(), "hpc",
                          time.time(), 0.1)


class MqttResponder:
    """A tiny cloud for edge tests: a paho client answering every request with the HPC.

    ``copies`` > 1 sends duplicate replies; ``delay_s`` answers late (from a timer thread);
    ``payload`` (then ``reference`` may be None): the raw reply bytes to publish instead of
    the HPC's answer (a misbehaving cloud: malformed replies over a real broker).
    """

    def __init__(self, broker_url: str, reference: ReferenceWalk | None, *, copies: int = 1,
                 delay_s: float = 0.0,
                 payload: Callable[[InferenceRequest], bytes] | None = None) -> None:
        import socket
        import threading
        from urllib.parse import urlsplit

        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        from adaptedge.protocol.codec import decode, encode
        from adaptedge.protocol.topics import reply_topic, wildcard

        self.reference = reference
        self.copies = copies
        self.delay_s = delay_s
        self.answered = 0
        self._timers: list[threading.Timer] = []
        url = urlsplit(broker_url)
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="edge-test-responder",
                             protocol=mqtt.MQTTv311, clean_session=True)

        def on_socket_open(c: mqtt.Client, userdata: object, sock: Any) -> None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def on_connect(c: mqtt.Client, *args: object) -> None:
            c.subscribe([(wildcard("req"), 1), (f"{wildcard('req')}/+", 1)])  # plain, per bundle

        def on_message(c: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
            request = decode(message.payload)
            assert isinstance(request, InferenceRequest)
            if payload is not None:
                data = payload(request)
            else:
                assert self.reference is not None, "give a reference walk or a payload"
                data = encode(hpc_reply(self.reference, request))
            topic = reply_topic(request.device)

            def send() -> None:
                for _ in range(self.copies):
                    c.publish(topic, data, qos=1)
                self.answered += 1

            if self.delay_s > 0:
                timer = threading.Timer(self.delay_s, send)
                timer.daemon = True
                self._timers.append(timer)
                timer.start()
            else:
                send()

        client.on_socket_open = on_socket_open
        client.on_connect = on_connect
        client.on_message = on_message
        client.reconnect_delay_set(1, 2)
        client.connect_async(url.hostname or "127.0.0.1", url.port or 1883)
        client.loop_start()
        self.client = client

    def wait_subscribed(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.client.is_connected() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.client.is_connected(), "the test responder could not connect"
        time.sleep(0.1)  # let the SUBSCRIBE reach the broker

    def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self.client.disconnect()
        self.client.loop_stop()
