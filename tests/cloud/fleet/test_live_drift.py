"""Live drift alarms of ``cloud serve --db`` (``cloud.live_drift``): stored audits and device
telemetry feed ``cloud.drift``; alarms land in the store, nothing fires without drift."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cloud.fleet.ingest import StoreIngest
from adaptedge.cloud.fleet.live_drift import LiveDrift
from adaptedge.cloud.fleet.store import FleetStore
from adaptedge.cloud.service.inference import HpcInference
from adaptedge.edge import EdgeRuntime, MqttUplink, Outbox
from adaptedge.edge.drain import OutboxDrainer
from adaptedge.protocol import Manifest
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.fleet import wait_until

Bundle = tuple[Path, Manifest]


def with_reference(manifest: Manifest) -> Manifest:
    ref = {p.name: {"escalation_rate": 0.3, "n_rows": 2000, "local_agreement": 0.9,
                    "n_local": 1400} for p in manifest.operating_points}
    return dataclasses.replace(manifest, metadata={**manifest.metadata, "drift_reference": ref})


def feed(live: LiveDrift, manifest: Manifest, agree_rate: float, esc_rate: float,
         n: int, seed: int, device: str = "dev1") -> None:
    """n decisions: audits of a tenth of the local ones, telemetry every 100 decisions."""
    rng = np.random.default_rng(seed)
    escalations = 0
    for i in range(n):
        if rng.random() < esc_rate:
            escalations += 1
            live.on_record(device, manifest.bundle_id, "escalated", 0, None, 1)
        elif rng.random() < 0.1:
            live.on_record(device, manifest.bundle_id, "audit", 0, 1,
                           1 if rng.random() < agree_rate else 0)
        if i % 100 == 99:
            live.on_telemetry(device, {"decisions": i + 1, "escalations": escalations})


def test_no_drift_no_alarm_and_drift_is_stored(toy_bundle: Bundle, tmp_path: Path) -> None:
    manifest = with_reference(toy_bundle[1])
    with FleetStore(tmp_path / "fleet.db") as store:
        live = LiveDrift(store, lambda b: manifest if b == manifest.bundle_id else None)
        feed(live, manifest, agree_rate=0.9, esc_rate=0.3, n=5000, seed=1)
        assert live.alarms == 0 and store.alarms() == []
        feed(live, manifest, agree_rate=0.5, esc_rate=0.3, n=5000, seed=2, device="dev2")
        feed(live, manifest, agree_rate=0.9, esc_rate=0.7, n=3000, seed=3, device="dev3")
        alarms = store.alarms()
    metrics = {(a.device, a.metric) for a in alarms}
    assert ("dev2", "agreement_down") in metrics and ("dev3", "escalation_up") in metrics
    assert all(a.device != "dev1" for a in alarms) and len(alarms) == live.alarms
    assert all(a.bundle_id == manifest.bundle_id and a.point == 0 for a in alarms)
    assert "drift alarm: device dev2" in next(a.detail for a in alarms if a.device == "dev2")


def test_unknown_bundles_points_and_restarts_are_ignored(toy_bundle: Bundle,
                                                         tmp_path: Path) -> None:
    manifest = with_reference(toy_bundle[1])
    with FleetStore(tmp_path / "fleet.db") as store:
        live = LiveDrift(store, lambda b: manifest if b == manifest.bundle_id else None)
        live.on_telemetry("dev1", {"decisions": 100, "escalations": 90})  # no record yet
        for _ in range(200):
            live.on_record("dev1", "other-bundle", "audit", 0, 1, 0)
            live.on_record("dev1", manifest.bundle_id, "audit", 99, 1, 0)  # no such point
        live.on_record("dev1", manifest.bundle_id, "escalated", 0, None, 1)
        live.on_telemetry("dev1", {"decisions": 50, "escalations": 15})  # restarted: 50 new
        assert store.alarms() == [] and live.alarms == 0


@pytest.mark.slow
@pytest.mark.broker
def test_the_ingest_raises_alarms_from_what_it_stores(toy_bundle: Bundle, tmp_path: Path,
                                                      mosquitto: MosquittoBroker) -> None:
    """Through a real mosquitto: a device whose local answers agree with the HPC far less
    than the bundle promises (0.99 on validation) gets an ``agreement_down`` alarm."""
    path, manifest = toy_bundle
    promised = dataclasses.replace(manifest, metadata={"drift_reference": {
        p.name: {"escalation_rate": p.escalation_rate, "local_agreement": 0.99, "n_local": 5000}
        for p in manifest.operating_points}})
    store = FleetStore(tmp_path / "fleet.db")
    live = LiveDrift(store, lambda b: promised if b == manifest.bundle_id else None)
    ingest = StoreIngest(HpcInference.load(path), store, mosquitto.url, client_id="ingest",
                         drift=live)
    uplink = MqttUplink(mosquitto.url, "dev1").start()
    outbox = Outbox(tmp_path / "outbox")
    rt = EdgeRuntime.load(path, operating_point="gate", device_id="dev1", outbox=outbox,
                          audit=AuditPolicy(fraction=1.0))  # no cloud answers: forward only
    drainer = OutboxDrainer(outbox, uplink, "dev1", rate_per_s=2000)
    try:
        ingest.start()
        assert uplink.wait_connected(10.0)
        drainer.start(tick_s=0.01)
        for row in np.random.default_rng(2).normal(scale=2.0, size=(300, 3)).astype(np.float32):
            rt.predict_row(row)
        wait_until(lambda: drainer.idle, 30.0, "the outbox to drain")
    finally:
        drainer.stop()
        uplink.close()
        ingest.stop()
        rt.close()
    alarms = store.alarms("dev1")
    assert alarms and {a.metric for a in alarms} == {"agreement_down"}
    assert live.alarms == len(alarms)


def test_a_regression_bundle_alarms_on_its_escalation_rate(tmp_path: Path) -> None:
    """Issue 33: a regression bundle's devices feed the escalation charts from telemetry as a
    classification bundle's do; their audits (values, no labels) feed no agreement chart."""
    from tests.support.toy_regression_bundle import build_toy_regression_bundle

    manifest = build_toy_regression_bundle(tmp_path / "b")
    ref = {p.name: {"escalation_rate": 0.2, "n_rows": 2000} for p in manifest.operating_points}
    manifest = dataclasses.replace(manifest, metadata={**manifest.metadata,
                                                       "drift_reference": ref})
    with FleetStore(tmp_path / "fleet.db") as store:
        live = LiveDrift(store, lambda b: manifest if b == manifest.bundle_id else None)
        for device, rate in (("steady", 0.2), ("drifted", 0.6)):
            rng = np.random.default_rng(7)
            escalations = 0
            for i in range(3000):
                escalations += bool(rng.random() < rate)
                if i % 10 == 0:  # an audit of a regression device: values, no labels
                    live.on_record(device, manifest.bundle_id, "audit", 1, None, None)
                if i % 100 == 99:
                    live.on_telemetry(device, {"decisions": i + 1, "escalations": escalations})
        alarms = store.alarms()
    assert alarms and {(a.device, a.metric) for a in alarms} == {("drifted", "escalation_up")}
    assert all(a.point == 1 for a in alarms) and len(alarms) == live.alarms
