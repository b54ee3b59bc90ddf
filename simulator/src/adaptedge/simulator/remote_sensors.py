"""Remote sensors: the simulator answers a device's sensor reads over MQTT from recorded rows.

A device under test that is not ours to start (real hardware) runs the real edge runtime with
sensor readers that ask the simulator instead of touching hardware. Topics (``<prefix>``
defaults to ``adaptedge``)::

    <prefix>/v1/<device>/sensor/<name>/get     device -> simulator   msgpack [read_id, row]
    <prefix>/v1/<device>/sensor/<name>/value   simulator -> device   msgpack [read_id, values]

``values`` is little-endian float32 bytes, one per feature column of the sensor (bundle order),
or nil when the row or sensor is unknown (the read fails; the runtime treats it as a sensor
fault). ``row`` may be nil: the server then uses the device's current row, which moves to the
next row when the device reads a sensor it already read in the current row (a decision reads
each sensor at most once). The reply is published after the sensor's latency from the bundle.

``RemoteSensorServer`` is the simulator side; ``RemoteSensors`` gives a device one reader per
sensor (``EdgeRuntime.predict(remote.readers)``) for devices that run our runtime.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt

from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.topics import DEFAULT_PREFIX, TOPIC_VERSION

_UNPACK = {"raw": False, "strict_map_key": True, "max_bin_len": 1 << 20, "max_str_len": 256,
           "max_array_len": 4, "max_map_len": 0, "max_ext_len": 0}


def sensor_topic(device: str, sensor: str, kind: str, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>/v1/<device>/sensor/<sensor>/<kind>`` with kind ``get`` or ``value``."""
    if kind not in ("get", "value"):
        raise ValueError(f"kind must be 'get' or 'value', not {kind!r}")
    return f"{prefix}/{TOPIC_VERSION}/{device}/sensor/{sensor}/{kind}"


def _client(client_id: str) -> Any:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                         protocol=mqtt.MQTTv311)

    def on_socket_open(c: Any, userdata: Any, sock: Any) -> None:
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    client.on_socket_open = on_socket_open
    return client


def _host_port(url: str) -> tuple[str, int]:
    rest = url.split("://", 1)[-1]
    host, _, port = rest.rpartition(":")
    return host or "127.0.0.1", int(port)


def run_client(client: Any, host: str, port: int) -> None:
    """Connect ``client`` and start its network thread."""
    client.connect(host, port, keepalive=30)
    client.loop_start()


def stop_client(client: Any) -> None:
    """Disconnect ``client`` (if it can) and stop its network thread; ``None`` is a no-op."""
    if client is not None:
        with contextlib.suppress(Exception):
            client.disconnect()
        client.loop_stop()


class _Subscribed:
    def __init__(self, client: Any, topics: list[str], timeout_s: float) -> None:
        done = threading.Event()
        client.on_connect = lambda c, u, f, r, p: c.subscribe([(t, 1) for t in topics])
        client.on_subscribe = lambda c, u, m, r, p: done.set()
        self.done = done
        self.timeout_s = timeout_s


class RemoteSensorServer:
    """Serves reads of ``devices`` from ``X`` (rows) after each sensor's bundle latency."""

    def __init__(self, broker_url: str, manifest: Manifest, X: npt.NDArray[Any],
                 devices: list[str], *, prefix: str = DEFAULT_PREFIX,
                 latency_scale: float = 1.0) -> None:
        self.host, self.port = _host_port(broker_url)
        self.prefix = prefix
        self.X = np.ascontiguousarray(X, dtype="<f4")
        self.sensors = {s.name: (np.asarray(s.features, dtype=np.intp), s.latency_ms / 1000.0)
                        for s in manifest.sensors}
        self.devices = list(devices)
        self.latency_scale = latency_scale
        self.rows: dict[str, int] = dict.fromkeys(devices, 0)
        self.read_in_row: dict[str, set[str]] = {d: set() for d in devices}
        self.reads = 0
        self.bad_reads = 0
        self._heap: list[tuple[float, int, str, bytes]] = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._stop = False
        self._client: Any = None
        self._sender: threading.Thread | None = None

    def start(self, timeout_s: float = 10.0) -> None:
        client = _client(f"sim-sensors-{id(self)}")
        topics = [f"{self.prefix}/{TOPIC_VERSION}/{d}/sensor/+/get" for d in self.devices]
        sub = _Subscribed(client, topics, timeout_s)
        client.on_message = self._on_message
        run_client(client, self.host, self.port)
        self._client = client
        self._sender = threading.Thread(target=self._send_loop, name="remote-sensors", daemon=True)
        self._sender.start()
        if not sub.done.wait(timeout_s):
            self.stop()
            raise RuntimeError(f"remote sensor server could not subscribe on {self.host}:"
                               f"{self.port} within {timeout_s:g} s")

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._sender is not None:
            self._sender.join(timeout=5)
        client, self._client = self._client, None
        stop_client(client)

    def __enter__(self) -> RemoteSensorServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        parts = msg.topic.split("/")
        if len(parts) < 6 or parts[-1] != "get":
            return
        device, sensor = parts[-4], parts[-2]
        try:
            read_id, row = msgpack.unpackb(msg.payload, **_UNPACK)
        except Exception:  # a malformed request is dropped and counted
            self.bad_reads += 1
            return
        spec = self.sensors.get(sensor)
        values: bytes | None = None
        delay = 0.0
        if spec is not None and device in self.rows:
            if row is None:
                if sensor in self.read_in_row[device]:
                    self.rows[device] += 1
                    self.read_in_row[device].clear()
                self.read_in_row[device].add(sensor)
                row = self.rows[device]
            if isinstance(row, int) and 0 <= row < len(self.X):
                values = self.X[row, spec[0]].tobytes()
                delay = spec[1] * self.latency_scale
        self.reads += 1
        payload = msgpack.packb([read_id, values], use_bin_type=True)
        topic = sensor_topic(device, sensor, "value", self.prefix)
        with self._cv:
            heapq.heappush(self._heap, (time.monotonic() + delay, next(self._seq), topic, payload))
            self._cv.notify()

    def _send_loop(self) -> None:
        while True:
            with self._cv:
                while not self._stop and (not self._heap
                                          or self._heap[0][0] > time.monotonic()):
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cv.wait(timeout=wait)
                if self._stop:
                    return
                _, _, topic, payload = heapq.heappop(self._heap)
            client = self._client
            if client is not None:
                client.publish(topic, payload, qos=1)


class RemoteSensors:
    """A device's readers that ask a ``RemoteSensorServer``: ``readers[name]()`` -> values."""

    def __init__(self, broker_url: str, device: str, sensors: list[str], *,
                 prefix: str = DEFAULT_PREFIX, timeout_s: float = 2.0) -> None:
        self.host, self.port = _host_port(broker_url)
        self.device = device
        self.prefix = prefix
        self.timeout_s = timeout_s
        self.sensor_names = list(sensors)
        self.row: int | None = None
        """Set to ask for a given row; None = the server's current row for this device."""
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[threading.Event, list[Any]]] = {}
        self._lock = threading.Lock()
        self._client: Any = None
        self.readers: dict[str, Callable[[], Any]] = {
            name: self._reader(name) for name in self.sensor_names}

    def start(self, timeout_s: float = 10.0) -> RemoteSensors:
        client = _client(f"{self.device}-sensors")
        topics = [sensor_topic(self.device, s, "value", self.prefix) for s in self.sensor_names]
        sub = _Subscribed(client, topics, timeout_s)
        client.on_message = self._on_message
        run_client(client, self.host, self.port)
        self._client = client
        if not sub.done.wait(timeout_s):
            self.stop()
            raise RuntimeError(f"remote sensors of {self.device} could not subscribe within "
                               f"{timeout_s:g} s")
        return self

    def stop(self) -> None:
        client, self._client = self._client, None
        stop_client(client)

    def __enter__(self) -> RemoteSensors:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        try:
            read_id, values = msgpack.unpackb(msg.payload, **_UNPACK)
        except Exception:  # not ours or malformed: ignore
            return
        with self._lock:
            waiter = self._pending.pop(read_id, None)
        if waiter is not None:
            waiter[1].append(values)
            waiter[0].set()

    def _reader(self, name: str) -> Callable[[], Any]:
        topic = sensor_topic(self.device, name, "get", self.prefix)

        def read() -> Any:
            client = self._client
            if client is None:
                raise RuntimeError("remote sensors are not started")
            read_id = next(self._ids)
            event: threading.Event = threading.Event()
            box: list[Any] = []
            with self._lock:
                self._pending[read_id] = (event, box)
            client.publish(topic, msgpack.packb([read_id, self.row], use_bin_type=True), qos=1)
            if not event.wait(self.timeout_s):
                with self._lock:
                    self._pending.pop(read_id, None)
                raise TimeoutError(f"sensor {name!r}: no value from the simulator within "
                                   f"{self.timeout_s:g} s")
            if box[0] is None:
                raise LookupError(f"sensor {name!r}: the simulator has no value for this row")
            return np.frombuffer(box[0], dtype="<f4")

        return read
