"""Run the gas drift scenario in the loop (``simulator.drift_hil``) and answer one JSON-able
summary (``benchmarks.drift_hil``): accuracy over time, when the live alarm fired, the audit
cost, and accuracy on the later rows before and after ``adaptedge recalibrate --db``."""

from __future__ import annotations

import re
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.trainer.policy.oracle import BundleRunner
from benchmarks.gas_drift.hil import (
    HilDriftConfig,
    accuracy_by_batch,
    decisions_by,
    device_counters,
    elapsed,
    escalation_by_batch,
    metric_total,
    phases,
    recalibrate_from_store,
    run_phase,
    write_rows_csv,
)
from benchmarks.gas_drift.stream import DriftConfig, gas_stream, train_early

ALARMS_METRIC = "adaptedge_drift_alarms_total"


def run_hil_scenario(out: Path, drift: DriftConfig, config: HilDriftConfig,
                     bundle: Path | None = None) -> dict[str, Any]:
    """Train on batches 1-2 (or reuse ``bundle``, trained by ``train_early`` with the same
    seed), run phase 1, recalibrate from its store, run phase 2 with both bundles."""
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    stream = gas_stream(drift.seed)
    if bundle is None:
        bundle = out / "bundle"
        train_early(bundle, stream, drift)
    manifest = BundleRunner.from_dir(bundle).manifest
    p1, p2 = phases(stream.batch, stream.drift_start, config)
    n_early = int(np.sum(p1 < stream.drift_start))
    filler = (stream.dataset.X_train, stream.dataset.y_train)
    csv1 = write_rows_csv(out / "phase1.csv", manifest.feature_names, manifest.classes,
                          stream.X[p1], stream.y[p1], filler)
    csv2 = write_rows_csv(out / "phase2.csv", manifest.feature_names, manifest.classes,
                          stream.X[p2], stream.y[p2], filler)
    one = run_phase(bundle, csv1, stream.y[p1], out / "phase1", config)
    summary: dict[str, Any] = {
        "config": {"drift": {k: v for k, v in asdict(drift).items() if k != "design"},
                   "hil": asdict(config)},
        "bundle_id": manifest.bundle_id, "point": manifest.default_operating_point,
        "rows": {"phase1": len(p1), "phase1_early": n_early,
                 "phase1_batch3": len(p1) - n_early, "phase2": len(p2),
                 "phase2_per_batch": _counts(stream.batch[p2])},
        "phase1": _phase_figures(one, stream.batch[p1], n_early),
    }
    recal = recalibrate_from_store(bundle, one["db"], out / "recalibrated",
                                   config.audit_fraction)
    summary["recalibration"] = {**recal, "command": "adaptedge recalibrate --bundle B --db "
                                "sqlite:///phase1/fleet.db --out B2 --audit-fraction "
                                f"{config.audit_fraction:g} --json"}
    old = run_phase(bundle, csv2, stream.y[p2], out / "phase2-deployed", config)
    new = run_phase(out / "recalibrated", csv2, stream.y[p2], out / "phase2-recalibrated",
                    config)
    hpc = np.argmax(BundleRunner.from_dir(bundle).hpc_proba(stream.X[p2]), axis=1)
    summary["phase2"] = {
        "deployed": _phase_figures(old, stream.batch[p2], None),
        "recalibrated": _phase_figures(new, stream.batch[p2], None),
        "hpc_accuracy": float(np.mean(hpc == stream.y[p2])),
        "hpc_accuracy_per_batch": _rate_by(hpc == stream.y[p2], stream.batch[p2]),
    }
    summary["wall_s"] = elapsed(started)
    return summary


def _phase_figures(phase: dict[str, Any], batch: npt.NDArray[np.int64],
                   drift_start: int | None) -> dict[str, Any]:
    """Accuracy over time, alarms (and their delay after ``drift_start``), rows stored,
    audit cost, the metrics scrape."""
    run, journal = phase["run"], phase["journal"]
    counters = device_counters(journal)
    hits = run.labels() == run.truth()
    decisions = max(counters.get("decisions", 0.0), 1.0)
    alarms = [_alarm(a, journal, drift_start) for a in phase["alarms"]]
    text = phase["metrics_text"]
    figures: dict[str, Any] = {
        "decisions": int(run.n), "accuracy": float(hits.mean()),
        "accuracy_per_batch": accuracy_by_batch(run, batch),
        "escalation_per_batch": escalation_by_batch(run, batch),
        "accuracy_windows_100": _windows(hits),
        "degraded": int(np.sum(np.asarray(run.columns.source) == "degraded")),
        "rows_stored": {k: sum(r.kind == k for r in phase["rows"]) for k in ("escalated", "audit")},
        "audits": counters.get("audits"), "audit_energy_mj": counters.get("audit_energy_mj"),
        "audit_bytes": counters.get("audit_bytes"), "audit_cost": counters.get("audit_cost"),
        "decision_energy_mj": counters.get("energy_mj"),
        "energy_mj_per_decision": (counters.get("energy_mj") or 0.0) / decisions,
        "outbox_records_left": counters.get("outbox_records"),
        "alarms": alarms,
        "metrics": {"scrapes": phase["scrapes"],
                    ALARMS_METRIC: metric_total(text, ALARMS_METRIC) if text else None},
    }
    if drift_start is not None:
        after = [a for a in alarms if a["device_decisions"] > drift_start]
        figures["alarms_before_drift"] = len(alarms) - len(after)
        figures["first_alarm_after_drift"] = after[0] if after else None
    return figures


def _alarm(alarm: Any, journal: list[dict[str, Any]], drift_start: int | None) -> dict[str, Any]:
    """A stored alarm with the device's decision count at its time (and after batch 3)."""
    made = decisions_by(journal, alarm.at)
    said = re.search(r"at decision (\d+)", alarm.detail)
    out = {"metric": alarm.metric, "device_decisions": made,
           "monitor_decision": int(said[1]) if said else None, "detail": alarm.detail}
    if drift_start is not None:
        out["decisions_after_drift"] = made - drift_start
        out["monitor_decisions_after_drift"] = (None if out["monitor_decision"] is None
                                                else out["monitor_decision"] - drift_start)
    return out


def _windows(hits: npt.NDArray[np.bool_], size: int = 100) -> list[float]:
    n = len(hits) // size * size
    return [round(float(v), 4) for v in hits[:n].reshape(-1, size).mean(axis=1)]


def _counts(batch: npt.NDArray[np.int64]) -> dict[str, int]:
    return {str(int(b)): int((batch == b).sum()) for b in np.unique(batch)}


def _rate_by(flags: npt.NDArray[np.bool_], batch: npt.NDArray[np.int64]) -> dict[str, float]:
    return {str(int(b)): float(flags[batch == b].mean()) for b in np.unique(batch)}
