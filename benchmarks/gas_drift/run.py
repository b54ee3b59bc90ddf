"""Run the whole gas drift scenario (``simulator.drift``) and the no-drift false-alarm check;
answer one JSON-able summary (``python -m benchmarks.drift``)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.cloud.fleet.drift import DriftDesign, DriftMonitor
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.protocol.drift_reference import reference_from_manifest
from adaptedge.protocol.manifest import Manifest
from benchmarks.gas_drift.stream import (
    DEVICE,
    DriftConfig,
    StreamRun,
    gas_stream,
    labelled_rows,
    monitor_stream,
    per_batch_accuracy,
    per_batch_rate,
    run_stream,
    train_early,
)


def run_scenario(out: Path, config: DriftConfig, *, null_streams: int = 200,
                 null_length: int = 5000) -> dict[str, Any]:
    """Train, stream, monitor, recalibrate; write bundles and rows under ``out``."""
    from adaptedge.trainer.fleet_rows_io import write_rows
    from adaptedge.trainer.recalibrate import recalibrate

    out.mkdir(parents=True, exist_ok=True)
    stream = gas_stream(config.seed)
    manifest = train_early(out / "bundle", stream, config)
    old = run_stream(out / "bundle", stream.X, stream.y, config)
    alarms = monitor_stream(manifest, old, config.design)
    start = stream.drift_start
    early_alarms = [a for a in alarms if a.decision <= start]
    after = [a for a in alarms if a.decision > start]
    summary: dict[str, Any] = {
        "config": {**asdict(config), "design": asdict(config.design)},
        "bundle_id": manifest.bundle_id, "point": manifest.default_operating_point,
        "reference": asdict(reference_from_manifest(manifest, manifest.default_operating_point)),
        "threshold": _threshold(manifest, config.design),
        "stream": {"rows": len(stream.y), "drift_start": start,
                   "batches": {str(int(b)): int((stream.batch == b).sum())
                               for b in np.unique(stream.batch)}},
        "alarms_before_batch3": [a.to_dict() for a in early_alarms],
        "first_alarm_after_batch3": after[0].to_dict() if after else None,
        "alarm_delay_decisions": after[0].decision - start if after else None,
        "n_alarms_after_batch3": len(after),
        "alarm_decisions": [a.decision for a in alarms],
        "batch3_first_500": _early_evidence(old, start, 500),
        "escalation_windows": _windows(np.asarray(old.run.columns.escalated, dtype=bool)),
        "batch_starts": {str(int(b)): int(np.flatnonzero(stream.batch == b)[0])
                         for b in np.unique(stream.batch)},
        "old": _figures(old, stream.batch),
        "hpc_accuracy_per_batch": per_batch_rate(old.hpc_label == stream.y, stream.batch),
    }
    if after:
        cut = min(after[0].decision + config.window, len(stream.y))
        rows = labelled_rows(manifest, old, stream.X, cut, config.rate_hz)
        write_rows(out / "rows.jsonl", rows)
        result = recalibrate(out / "bundle", rows, out / "recalibrated",
                             audit=AuditPolicy(config.audit_fraction, config.audit_seed),
                             force=True)
        new = run_stream(out / "recalibrated", stream.X[cut:], stream.y[cut:], config, cut)
        old_tail = _tail(old, cut)
        summary["recalibration"] = {
            "cut_decision": cut, "rows": {k: int(sum(r.kind == k for r in rows))
                                          for k in ("escalated", "audit")},
            "audit_cost_until_cut": _audit_until(old, manifest, cut),
            "hpc_accuracy_after_cut": float(np.mean(old.hpc_label[cut:] == stream.y[cut:])),
            "decision_energy_mj_until_cut": float(np.sum(np.asarray(old.run.columns.energy_mj)[:cut])),
            "bundle_id": result.manifest.bundle_id, "chosen": asdict(result.chosen),
            "target_agreement": result.target, "n_effective": result.n_effective,
            "before": _tail_figures(old_tail, stream.y[cut:], stream.batch[cut:]),
            "after": _figures(new, stream.batch[cut:]),
        }
    summary["no_drift"] = {
        "time_ordered_rows": start, "time_ordered_alarms": len(early_alarms),
        "resampled": no_drift_false_alarms(manifest, old, start, config.design, config,
                                           null_streams, null_length),
        # a design loose enough that its bound is testable on this many streams
        "resampled_loose_design": no_drift_false_alarms(
            manifest, old, start, DriftDesign(false_alarm=0.2, horizon=null_length), config,
            null_streams, null_length)}
    return summary


def _early_evidence(s: StreamRun, start: int, n: int) -> dict[str, Any]:
    """What the monitor saw in the first ``n`` decisions of batch 3: the escalation rate, the
    audits and their agreement (to explain an alarm's delay)."""
    esc = np.asarray(s.run.columns.escalated, dtype=bool)[start:start + n]
    audited = s.audited[start:start + n]
    agree = (s.local_label == s.hpc_label)[start:start + n][audited]
    return {"decisions": len(esc), "escalation_rate": float(esc.mean()),
            "audits": int(audited.sum()),
            "audited_agreement": float(agree.mean()) if agree.size else None}


def _windows(flags: npt.NDArray[np.bool_], size: int = 100) -> dict[str, Any]:
    """The escalation rate over consecutive windows of ``size`` decisions."""
    n = len(flags) // size * size
    return {"size": size, "rate": flags[:n].reshape(-1, size).mean(axis=1).round(4).tolist()}


def _threshold(manifest: Manifest, design: DriftDesign) -> float:
    point = manifest.default_operating_point
    return DriftMonitor(reference_from_manifest(manifest, point), design).threshold


def _figures(s: StreamRun, batch: npt.NDArray[np.int64]) -> dict[str, Any]:
    esc = np.asarray(s.run.columns.escalated, dtype=bool)
    return {"accuracy": s.run.accuracy(), "accuracy_per_batch": per_batch_accuracy(s.run, batch),
            "escalation_per_batch": per_batch_rate(esc, batch),
            "escalation_rate": float(esc.mean()),
            "energy_mj_per_decision": s.decision_cost["energy_mj"] / max(s.run.n, 1),
            "decision_cost": s.decision_cost, "audit_cost": s.audit_cost}


def _tail(s: StreamRun, cut: int) -> dict[str, Any]:
    c = s.run.columns
    return {"label": np.asarray(c.label)[cut:], "escalated": np.asarray(c.escalated, bool)[cut:],
            "energy": np.asarray(c.energy_mj, dtype=np.float64)[cut:]}


def _tail_figures(t: dict[str, Any], y: npt.NDArray[np.int64], batch: npt.NDArray[np.int64]
                  ) -> dict[str, Any]:
    hits = t["label"] == y
    return {"accuracy": float(hits.mean()),
            "accuracy_per_batch": per_batch_rate(hits, batch),
            "escalation_per_batch": per_batch_rate(t["escalated"], batch),
            "escalation_rate": float(t["escalated"].mean()),
            "energy_mj_per_decision": float(t["energy"].mean())}


def _audit_until(s: StreamRun, manifest: Manifest, cut: int) -> dict[str, float]:
    from benchmarks.gas_drift.stream import audit_costs

    mask = s.audited.copy()
    mask[cut:] = False
    return audit_costs(manifest, s.run, mask)


def no_drift_false_alarms(manifest: Manifest, old: StreamRun, start: int, design: DriftDesign,
                          config: DriftConfig, n_streams: int, length: int) -> dict[str, Any]:
    """The monitor on ``n_streams`` seeded no-drift replays of ``length`` decisions drawn from
    the batches 1-2 test rows (the first ``start`` rows of the stream). The bundle's decisions
    are deterministic per row, so resampling the rows' outcomes replays resampled rows."""
    ref = reference_from_manifest(manifest, manifest.default_operating_point)
    esc = np.asarray(old.run.columns.escalated, dtype=bool)[:start]
    agree = (old.local_label == old.hpc_label)[:start]
    fired = 0
    for r in range(n_streams):
        rows = np.random.default_rng([config.seed, r]).integers(0, start, size=length)
        audit = AuditPolicy(config.audit_fraction, r).selected_many(
            DEVICE, np.arange(length), old.point_index) & ~esc[rows]
        monitor = DriftMonitor(ref, design)
        for i, row in enumerate(rows.tolist()):
            if monitor.observe_decision(bool(esc[row])) is not None or (
                    audit[i] and monitor.observe_audit(bool(agree[row])) is not None):
                fired += 1
                break
    probe = DriftMonitor(ref, design)
    bound = min(1.0, length * len(probe.charts) * float(np.exp(-probe.threshold)))
    return {"design": asdict(design), "threshold": probe.threshold,
            "streams": n_streams, "length": length, "streams_with_alarm": fired,
            "false_alarm_rate": fired / max(n_streams, 1), "designed_bound": bound,
            "escalation_rate": float(esc.mean()), "local_agreement": float(agree[~esc].mean())}
