"""A passive MQTT subscriber that timestamps every request devices send (wall clock).

HIL uses it to start the outage schedule when the devices are really deciding (their first
request), and to place each device's decisions on the wall clock: a device's records carry
row indices, and ``start = min(arrival of request - row / rate)`` over its requests.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

from adaptedge.protocol.codec import decode
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.messages import InferenceRequest
from adaptedge.protocol.topics import DEFAULT_PREFIX, wildcard
from adaptedge.simulator.remote_sensors import run_client, stop_client


class RequestMonitor:
    def __init__(self, broker_url: str, *, prefix: str = DEFAULT_PREFIX) -> None:
        rest = broker_url.split("://", 1)[-1]
        host, _, port = rest.rpartition(":")
        self.host, self.port = host or "127.0.0.1", int(port)
        self.topic = wildcard("req", prefix)
        self.arrivals: dict[tuple[str, int], float] = {}
        self.first_request = threading.Event()
        self._subscribed = threading.Event()
        self._lock = threading.Lock()
        self._client: Any = None

    def start(self, timeout_s: float = 10.0) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"sim-monitor-{id(self)}",
                             protocol=mqtt.MQTTv311)

        def on_socket_open(c: Any, userdata: Any, sock: Any) -> None:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def on_connect(c: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
            c.subscribe([(self.topic, 0), (f"{self.topic}/+", 0)])  # plain and per bundle

        def on_subscribe(c: Any, userdata: Any, mid: Any, reasons: Any, props: Any) -> None:
            self._subscribed.set()

        def on_message(c: Any, userdata: Any, msg: Any) -> None:
            now = time.time()
            try:
                message = decode(msg.payload)
            except ProtocolError:
                return
            if isinstance(message, InferenceRequest):
                with self._lock:
                    self.arrivals.setdefault((message.device, message.request_id), now)
                self.first_request.set()

        client.on_socket_open = on_socket_open
        client.on_connect = on_connect
        client.on_subscribe = on_subscribe
        client.on_message = on_message
        run_client(client, self.host, self.port)
        self._client = client
        if not self._subscribed.wait(timeout_s):
            self.stop()
            raise RuntimeError(f"request monitor could not subscribe to {self.topic} on "
                               f"{self.host}:{self.port} within {timeout_s:g} s")

    def stop(self) -> None:
        client, self._client = self._client, None
        stop_client(client)

    def arrival(self, device: str, request_id: int) -> float | None:
        with self._lock:
            return self.arrivals.get((device, request_id))
