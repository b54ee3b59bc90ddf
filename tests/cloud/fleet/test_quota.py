"""The per-device row quota through a real mosquitto: a device sending more records than its
quota gets the rest refused (acknowledged ``refused``: it drops them), counted by the ingest,
logged, and reported by ``fleet status`` and the Prometheus metrics; other devices are
unaffected."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from adaptedge.cli.main import main
from adaptedge.cloud.fleet.ingest import StoreIngest
from adaptedge.cloud.fleet.metrics import FleetCollector
from adaptedge.cloud.fleet.store import FleetStore, RowQuota
from adaptedge.cloud.service.inference import HpcInference
from adaptedge.edge import MqttUplink, Outbox
from adaptedge.edge.drain import OutboxDrainer
from adaptedge.protocol import Manifest
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.fleet import offline_outbox

pytestmark = pytest.mark.broker
QUOTA = 25


def _drain(url: str, folder: Path, device: str) -> dict[str, float]:
    uplink = MqttUplink(url, device).start()
    try:
        assert uplink.wait_connected(10.0), uplink.last_error
        drainer = OutboxDrainer(Outbox(folder), uplink, device, rate_per_s=1000,
                                ack_timeout_s=2.0)
        assert drainer.drain(60.0), drainer.counters
        return drainer.counters
    finally:
        uplink.close()


def test_records_past_a_devices_quota_are_refused_counted_and_reported(
        toy_bundle: tuple[Path, Manifest], mosquitto: MosquittoBroker, tmp_path: Path,
        caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    bundle, _ = toy_bundle
    n = offline_outbox(bundle, tmp_path / "greedy", 300, device="greedy")
    m = offline_outbox(bundle, tmp_path / "honest", 40, device="honest")
    assert n > QUOTA >= m
    store = FleetStore(tmp_path / "fleet.db", quota=RowQuota(max_rows=QUOTA, window_s=3600.0))
    ingest = StoreIngest(HpcInference.load(bundle), store, mosquitto.url, client_id="ingest")
    caplog.set_level(logging.WARNING, logger="adaptedge.cloud.fleet.ingest")
    ingest.start()
    try:
        greedy = _drain(mosquitto.url, tmp_path / "greedy", "greedy")
        honest = _drain(mosquitto.url, tmp_path / "honest", "honest")
    finally:
        ingest.stop()
    assert greedy["drain_stored"] == QUOTA and greedy["drain_refused"] == n - QUOTA
    assert honest["drain_stored"] == m and honest["drain_refused"] == 0
    assert ingest.counts["over_quota"] == n - QUOTA
    assert store.count_records("greedy") == QUOTA and store.count_records("honest") == m
    assert store.quota_refusals()["greedy"][0] == n - QUOTA
    assert "device greedy is past its row quota" in caplog.text
    registry = CollectorRegistry()
    registry.register(FleetCollector("b", dict, dict, {}, store))
    metrics = generate_latest(registry).decode()
    assert f'adaptedge_store_quota_refused_total{{device="greedy"}} {float(n - QUOTA)}' in metrics
    store.close()
    assert main(["fleet", "status", "--db", str(tmp_path / "fleet.db")]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert lines["greedy"][-1] == str(n - QUOTA) and lines["honest"][-1] == "0"
