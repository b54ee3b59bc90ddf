"""The drift scenario in the loop (simulator.drift_hil): the stream's phases, one small HIL
phase through the whole fleet loop (store, live monitor, metrics, recalibrate --db), and the
gas acceptance numbers (slow: it trains on gas batches 1-2 and streams ~2,500 decisions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaptedge.trainer.data.datasets import load_dataset
from benchmarks.gas_drift.hil import (
    HilDriftConfig,
    decisions_by,
    device_counters,
    metric_total,
    phases,
    recalibrate_from_store,
    run_phase,
    write_rows_csv,
)
from tests.support.dataset_bundle import build_dataset_bundle


def test_phases_keep_time_order_and_split_batch_3() -> None:
    batch = np.array([1] * 50 + [2] * 30 + [3] * 100 + [4] * 10 + [6] * 40)
    config = HilDriftConfig(early_rows=40, batch3_rows=60, phase1_batch3=45, per_batch=20)
    one, two = phases(batch, 80, config)
    assert len(one) == 40 + 45 and np.all(np.diff(one) > 0) and np.all(np.diff(two) > 0)
    assert np.sum(batch[one] == 3) == 45 and np.sum(batch[two] == 3) == 15
    assert np.sum(batch[two] == 4) == 10 and np.sum(batch[two] == 6) == 20
    assert one[-1] < two[0] and set(batch[one[:40]]) == {1, 2}


@pytest.mark.slow
@pytest.mark.broker
def test_one_phase_through_the_fleet_loop(tmp_path: Path) -> None:
    """A device replays CSV rows with audits on; every escalation and audit is stored, the
    metrics were scraped and parse, and recalibrate --db writes a bundle from the store."""
    bundle = tmp_path / "bundle"
    manifest = build_dataset_bundle(bundle, "wall-robot", n_sensors=4, escalate=0.4)
    data = load_dataset("wall-robot")
    X, y = data.X_test[:150], data.y_test[:150]
    rows = write_rows_csv(tmp_path / "rows.csv", manifest.feature_names, manifest.classes, X, y,
                          (data.X_train, data.y_train))
    config = HilDriftConfig(audit_fraction=0.3, rate_hz=100.0, timeout_s=120.0)
    phase = run_phase(bundle, rows, y, tmp_path / "phase", config)
    counters = device_counters(phase["journal"])
    assert phase["run"].n == 150 and counters["decisions"] == 150
    assert phase["run"].labels().tolist() == [
        r["label_index"] for r in phase["journal"] if r.get("kind") == "decision"]
    kinds = [r.kind for r in phase["rows"]]
    assert kinds.count("escalated") == counters["escalations"] > 0
    assert kinds.count("audit") == counters["audits"] > 0
    assert counters["outbox_records"] == 0 and counters["audit_energy_mj"] > 0
    assert phase["scrapes"] > 0
    assert metric_total(phase["metrics_text"], "adaptedge_drift_alarms_total") <= len(
        phase["alarms"])
    assert decisions_by(phase["journal"], 0.0) == 0
    assert decisions_by(phase["journal"], float("inf")) == 150
    out = recalibrate_from_store(bundle, phase["db"], tmp_path / "recal", 0.3)
    assert out["rows"] == {"escalated": kinds.count("escalated"), "audit": kinds.count("audit")}
    assert (tmp_path / "recal" / "manifest.json").exists()


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(900)
def test_gas_drift_in_the_loop_acceptance(tmp_path: Path,
                                          gas_scenario: tuple[Path, dict[str, Any]]) -> None:
    """Seed 0 in the loop: no live alarm on the batches 1-2 test rows, the first within 500
    decisions of batch 3, the rows stored are what recalibration used. The early bundle is the
    offline scenario's (``train_early``, seed 0: what ``run_hil_scenario`` would train)."""
    from benchmarks.gas_drift.hil_run import run_hil_scenario
    from benchmarks.gas_drift.stream import DriftConfig

    config = HilDriftConfig(batch3_rows=600, phase1_batch3=500, per_batch=40)
    s = run_hil_scenario(tmp_path, DriftConfig(), config, bundle=gas_scenario[0] / "bundle")
    one = s["phase1"]
    assert one["alarms_before_drift"] == 0
    first = one["first_alarm_after_drift"]
    assert first is not None and 0 < first["decisions_after_drift"] <= 500
    assert one["metrics"]["adaptedge_drift_alarms_total"] >= 1
    assert s["recalibration"]["rows"] == one["rows_stored"]
    assert one["rows_stored"]["audit"] == one["audits"] > 0
    for name in ("deployed", "recalibrated"):
        assert s["phase2"][name]["decisions"] == s["rows"]["phase2"]
