"""Remote sensors over MQTT: a device's runtime reads the simulator's recorded rows."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from adaptedge.edge import EdgeRuntime
from adaptedge.protocol import Manifest
from adaptedge.simulator.brokers import MosquittoBroker
from adaptedge.simulator.remote_sensors import RemoteSensors, RemoteSensorServer, sensor_topic

pytestmark = pytest.mark.broker


def test_topic_layout() -> None:
    assert sensor_topic("dev-1", "accel", "get") == "adaptedge/v1/dev-1/sensor/accel/get"
    with pytest.raises(ValueError, match="kind"):
        sensor_topic("dev-1", "accel", "put")


@pytest.mark.parametrize("explicit_row", [True, False])
def test_runtime_on_remote_sensors_decides_like_replay(
        toy_bundle: tuple[Path, Manifest], mosquitto: MosquittoBroker, explicit_row: bool) -> None:
    bundle, manifest = toy_bundle
    rng = np.random.default_rng(2)
    X = rng.normal(size=(25, 3)).astype(np.float32)
    reference = EdgeRuntime.load(bundle, operating_point="walk")
    device = EdgeRuntime.load(bundle, operating_point="walk", device_id="hw-1")
    with RemoteSensorServer(mosquitto.url, manifest, X, ["hw-1"]) as server, \
            RemoteSensors(mosquitto.url, "hw-1", [s.name for s in manifest.sensors]) as remote:
        for i in range(len(X)):
            remote.row = i if explicit_row else None
            t0 = time.monotonic()
            got = device.predict(remote.readers)
            elapsed_ms = (time.monotonic() - t0) * 1000
            want = reference.predict_row(X[i])
            assert got.failed_sensors == {}
            assert (got.label_index, got.sensors_read, got.escalated) == \
                (want.label_index, want.sensors_read, want.escalated)
            nominal = sum(manifest.sensor(s).latency_ms for s in got.sensors_read)
            assert elapsed_ms >= nominal * 0.9
        assert server.reads >= len(X)


def test_unknown_row_is_a_sensor_fault(toy_bundle: tuple[Path, Manifest],
                                       mosquitto: MosquittoBroker) -> None:
    bundle, manifest = toy_bundle
    X = np.zeros((1, 3), np.float32)
    device = EdgeRuntime.load(bundle, operating_point="walk", device_id="hw-2")
    with RemoteSensorServer(mosquitto.url, manifest, X, ["hw-2"]), \
            RemoteSensors(mosquitto.url, "hw-2", ["a", "b"]) as remote:
        remote.row = 5
        decision = device.predict(remote.readers)
    assert "a" in decision.failed_sensors
    assert decision.source == "degraded"
