"""Issue 33, the fleet store for regression through a real mosquitto: a regression device's
escalations and audits reach the store with the HPC's value and the device's own, and
``fleet status`` shows the audits' error against the HPC in the target's unit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main
from adaptedge.cloud.fleet.ingest import StoreIngest
from adaptedge.cloud.fleet.store import FleetStore
from adaptedge.cloud.fleet.view import device_status
from adaptedge.cloud.service.inference import HpcInference
from adaptedge.edge import EdgeRuntime, MqttUplink, Outbox
from adaptedge.edge.drain import OutboxDrainer
from adaptedge.protocol import LinkSpec
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.fleet import wait_until
from tests.support.toy_regression_bundle import build_toy_regression_bundle, hpc_value

pytestmark = pytest.mark.broker


def test_audits_store_the_device_value_and_the_hpc_value(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "b"
    # no cloud service answers: escalations degrade at a short deadline, their records stay
    manifest = build_toy_regression_bundle(path, link=LinkSpec(deadline_ms=20.0))
    X = np.random.default_rng(3).normal(scale=2.0, size=(40, 3)).astype(np.float32)
    store = FleetStore(tmp_path / "fleet.db")
    with MosquittoBroker() as broker:
        ingest = StoreIngest(HpcInference.load(path), store, broker.url, client_id="ingest")
        uplink = MqttUplink(broker.url, "dev1").start()
        outbox = Outbox(tmp_path / "outbox")
        rt = EdgeRuntime.load(path, operating_point="walk", uplink=uplink, outbox=outbox,
                              audit=AuditPolicy(fraction=1.0, seed=1))
        drainer = OutboxDrainer(outbox, uplink, "dev1", rate_per_s=500, ack_timeout_s=0.5)
        try:
            ingest.start()
            assert uplink.wait_connected(10.0), uplink.last_error
            drainer.start(tick_s=0.01)
            decisions = [rt.predict_row(row) for row in X]
            wait_until(lambda: drainer.idle and len(outbox) == 0, 30.0, "the outbox to drain")
        finally:
            drainer.stop()
            uplink.close()
            ingest.stop()
            rt.close()
    counters = rt.counters
    assert counters["audits"] > 0 and counters["escalations"] > 0
    rows = store.labelled_rows(bundle_id=manifest.bundle_id)
    assert len(rows) == counters["audits"] + counters["escalations"]
    assert all(r.is_regression and r.hpc_label == -1 and r.local_label is None for r in rows)
    by_request = {r.request_id: r for r in rows}
    audits = [r for r in rows if r.kind == "audit"]
    local = [d for d in decisions if d.source == "local"]
    assert len(audits) == len(local)  # every local decision audited (fraction 1)
    for r in rows:  # the HPC's value on what the device measured (all of it, here)
        x = np.nan_to_num(np.asarray(r.features, dtype=np.float32))
        assert r.hpc_value == pytest.approx(hpc_value(x), rel=1e-6, abs=1e-6)
    escalated = [d for d in decisions if d.escalated]
    for d in escalated:  # the device's own value travels with its escalation
        assert by_request[d.request_id].local_value == d.value
    assert sorted(r.local_value for r in audits) == sorted(d.value for d in local)
    errors = np.array([r.local_value - r.hpc_value for r in audits])  # type: ignore[operator]
    (status,) = device_status(store)
    assert status["audits_valued"] == len(audits)
    assert status["audit_mse"] == pytest.approx(float(np.mean(errors ** 2)), rel=1e-9)
    assert status["audit_mae"] == pytest.approx(float(np.mean(np.abs(errors))), rel=1e-9)
    assert status["agreement"] is None  # no labels to agree on
    store.close()
    assert main(["fleet", "status", "--db", str(tmp_path / "fleet.db")]) == 0
    shown = capsys.readouterr().out
    assert (f"dev1: audited values vs the HPC's: MSE {status['audit_mse']:.4g}, MAE "
            f"{status['audit_mae']:.4g} (the target's unit) over {len(audits)} audits") in shown
