"""The gas drift scenario: train on gas batches 1-2, stream the later batches, catch the drift,
recalibrate from what audits and escalations revealed.

1. **Train** (``train_early``) on batches 1-2 only: a seeded stratified 60/20/20 split of those
   rows; the method's validation frontier and the trainer's default rule pick the operating
   point (validation only). The bundle carries each point's drift reference (validation).
2. **Stream** (``run_stream``) the held-out test rows of batches 1-2, then batches 3, 4, 5, 6,
   8, 9 in time order through the batched replay (one device, ``dev-0``), with audit sampling
   on (``protocol.audit.AuditPolicy``). An audit reads the sensors the HPC needs and pays the
   link: charged separately from the decision costs.
3. **Monitor**: ``cloud.drift.DriftMonitor`` sees every decision (escalated?) and every audit
   (local answer == HPC's?), in stream order.
4. **Recalibrate** (``trainer.recalibrate``) from the escalated and audit rows seen up to the
   first alarm after batch 3's start plus ``window`` decisions, then replay the recalibrated
   bundle on the rest of the stream and compare with the old bundle, batch by batch.

Truth labels are used only to score; no choice sees the later batches' labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.cloud.fleet.drift import DriftAlarm, DriftDesign, DriftMonitor
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.protocol.bundle import verify
from adaptedge.protocol.costs import decision_cost
from adaptedge.protocol.drift_reference import reference_from_manifest
from adaptedge.protocol.fleet_rows import LabelledRow
from adaptedge.protocol.manifest import Manifest
from adaptedge.simulator.records import RunResult
from adaptedge.simulator.replay import replay
from adaptedge.simulator.scenario import DevicesConfig, Scenario
from adaptedge.trainer.data.builtin_datasets import GAS_CLASSES, gas_rows
from adaptedge.trainer.data.costs import PRESETS
from adaptedge.trainer.data.dataset_core import Dataset, Parts, assemble, sensor_groups
from adaptedge.trainer.data.splits import stratified_split
from adaptedge.trainer.policy.oracle import BundleRunner

DEVICE = "dev-0"
TRAIN_BATCHES = (1, 2)
LATER_BATCHES = (3, 4, 5, 6, 8, 9)


@dataclass(frozen=True)
class DriftConfig:
    """Everything the scenario's numbers depend on (all seeds stated)."""

    method: str = "adapt-gbrt"
    seed: int = 0
    """Split, HPC and method seed."""
    quick: bool = True
    audit_fraction: float = 0.05
    audit_seed: int = 0
    window: int = 500
    """Decisions after the alarm whose rows recalibration may also use."""
    rate_hz: float = 20.0
    design: DriftDesign = field(default_factory=DriftDesign)


@dataclass(frozen=True)
class GasStream:
    """The early dataset (batches 1-2 split) and the stream: early test rows, then later batches."""

    dataset: Dataset
    X: npt.NDArray[np.float32]
    y: npt.NDArray[np.int64]
    batch: npt.NDArray[np.int64]

    @property
    def drift_start(self) -> int:
        """Index of the first row of batch 3 in the stream."""
        return int(np.flatnonzero(self.batch == LATER_BATCHES[0])[0])


def gas_stream(seed: int) -> GasStream:
    X, y, batch, names = gas_rows()
    early = np.flatnonzero(np.isin(batch, TRAIN_BATCHES))
    parts = stratified_split(y[early], (0.6, 0.2, 0.2), seed)
    sensors = sensor_groups([f"sensor{s + 1}" for s in range(16)],
                            [range(8 * s, 8 * s + 8) for s in range(16)],
                            per_feature_nominal=False)
    ds = assemble("gas-early", Parts(X[early], y[early], (parts[0], parts[1], parts[2])),
                  GAS_CLASSES, names, sensors, PRESETS["energy"],
                  f"UCI gas drift, batches 1-2 only, seeded (seed {seed}) stratified 60/20/20")
    test = early[np.sort(parts[2])]  # batches 1-2 test rows, in time order
    later = np.flatnonzero(np.isin(batch, LATER_BATCHES))
    order = np.concatenate([test, later])
    return GasStream(ds, X[order], y[order], batch[order])


def train_early(out: Path, stream: GasStream, config: DriftConfig) -> Manifest:
    """Train ``config.method`` on the early split, export with the drift reference."""
    from adaptedge.trainer.api import default_chooser, library_versions
    from adaptedge.trainer.export.bundle import export_bundle
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.registry import MethodOptions, get_method
    from adaptedge.trainer.policy.frontier import pareto_frontier

    ds = stream.dataset
    hpc = fit_hpc(ds, seed=config.seed, cache=False)
    options = MethodOptions(seed=config.seed, progress=False, quick=config.quick)
    frontier = pareto_frontier(get_method(config.method)(ds, hpc, options))
    meta = {"method": config.method, "dataset": ds.name, "dataset_description": ds.description,
            "seed": config.seed, "quick": config.quick, "library_versions": library_versions()}
    return export_bundle(out, ds, hpc, frontier, metadata=meta, force=True,
                         choose=default_chooser(list(frontier), None))


@dataclass
class StreamRun:
    """One bundle replayed on (part of) the stream, with audits and the HPC's labels."""

    run: RunResult
    point_index: int
    hpc_label: npt.NDArray[np.int64]
    local_label: npt.NDArray[np.int64]
    audited: npt.NDArray[np.bool_]
    audit_cost: dict[str, float]
    decision_cost: dict[str, float]


def run_stream(bundle: Path, X: npt.NDArray[np.float32], y: npt.NDArray[np.int64],
               config: DriftConfig, first_index: int = 0) -> StreamRun:
    """Replay ``X`` (decision numbers from ``first_index``) with audit sampling."""
    manifest = verify(bundle)
    point = manifest.default_operating_point
    point_index = [p.name for p in manifest.operating_points].index(point)
    scenario = Scenario(seed=config.seed, devices=DevicesConfig(rate_hz=config.rate_hz))
    run = replay(bundle, X, y, scenario=scenario, batched=True)
    runner = BundleRunner.from_dir(bundle)
    hpc = np.argmax(runner.hpc_proba(X), axis=1).astype(np.int64)
    local_label = runner.evaluate(manifest.operating_point(point).policy, X).labels
    escalated = np.asarray(run.columns.escalated, dtype=bool)
    policy = AuditPolicy(config.audit_fraction, config.audit_seed)
    chosen = policy.selected_many(DEVICE, np.arange(len(X)) + first_index, point_index)
    audited = chosen & ~escalated
    return StreamRun(run, point_index, hpc, local_label, audited,
                     audit_costs(manifest, run, audited), decision_costs(run))


def audit_costs(manifest: Manifest, run: RunResult, audited: npt.NDArray[np.bool_]
                ) -> dict[str, float]:
    """What the audits added: the HPC's sensors not yet read plus one link exchange each."""
    sensors = list(run.columns.sensors)
    extra: dict[tuple[str, ...], Any] = {}
    totals = {"audits": float(audited.sum()), "energy_mj": 0.0, "latency_ms": 0.0,
              "scalar": 0.0, "bytes": 0.0}
    for i in np.flatnonzero(audited).tolist():
        key = tuple(sorted(sensors[i]))
        if key not in extra:
            full = decision_cost(manifest, set(key) | set(manifest.hpc.sensors), True)
            base = decision_cost(manifest, key, False)
            extra[key] = (full.energy_mj - base.energy_mj, full.latency_ms - base.latency_ms,
                          full.scalar - base.scalar, full.bytes - base.bytes)
        for name, value in zip(("energy_mj", "latency_ms", "scalar", "bytes"), extra[key],
                               strict=True):
            totals[name] += value
    return totals


def decision_costs(run: RunResult) -> dict[str, float]:
    return {"decisions": float(run.n), "energy_mj": float(np.sum(run.columns.energy_mj)),
            "cloud_calls": float(np.sum(np.asarray(run.columns.sent, dtype=bool)))}


def monitor_stream(manifest: Manifest, stream: StreamRun, design: DriftDesign) -> list[DriftAlarm]:
    """Feed the drift monitor every decision and audit, in stream order; all its alarms."""
    point = manifest.operating_points[stream.point_index].name
    monitor = DriftMonitor(reference_from_manifest(manifest, point), design, device=DEVICE,
                           point=point)
    escalated = np.asarray(stream.run.columns.escalated, dtype=bool).tolist()
    agree = (stream.local_label == stream.hpc_label).tolist()
    audited = stream.audited.tolist()
    for i, esc in enumerate(escalated):
        monitor.observe_decision(esc)
        if audited[i]:
            monitor.observe_audit(agree[i])
    return monitor.alarms


def labelled_rows(manifest: Manifest, stream: StreamRun, X: npt.NDArray[np.float32],
                  upto: int, rate_hz: float) -> list[LabelledRow]:
    """The rows the cloud would hold after ``upto`` decisions: every escalation (labelled by
    the HPC) and every audit."""
    escalated = np.asarray(stream.run.columns.escalated, dtype=bool)
    rows = []
    for i in np.flatnonzero((escalated | stream.audited)[:upto]).tolist():
        rows.append(LabelledRow(
            device=DEVICE, bundle_id=manifest.bundle_id, request_id=i,
            kind="escalated" if escalated[i] else "audit", point=stream.point_index,
            features=tuple(float(v) for v in X[i]),
            local_label=None if escalated[i] else int(stream.local_label[i]),
            hpc_label=int(stream.hpc_label[i]), received_at=i / rate_hz))
    return rows


def per_batch_accuracy(run: RunResult, batch: npt.NDArray[np.int64]) -> dict[str, float]:
    hits = run.labels() == run.truth()
    return {str(int(b)): float(hits[batch == b].mean()) for b in np.unique(batch)}


def per_batch_rate(flags: npt.NDArray[np.bool_], batch: npt.NDArray[np.int64]) -> dict[str, float]:
    return {str(int(b)): float(flags[batch == b].mean()) for b in np.unique(batch)}
