"""Recalibration: re-pick gate thresholds and the operating point from labelled field rows.

**What the rows estimate, without bias.** Every decision of a device is either escalated
(the gate sent it: with store-and-forward *every* escalation becomes an ``escalated`` row) or
answered locally (a seeded, input-independent ``fraction`` of those become ``audit`` rows,
``protocol.audit``). So escalated rows are a census of the escalated stratum (weight 1) and
audit rows a uniform sample of the local stratum (weight ``1 / fraction``): the weighted mean
of any per-row quantity over both kinds (Horvitz-Thompson, ratio form) estimates its mean over
all decisions without the selection bias of the escalated rows alone. Each row carries every
feature the HPC needs, so any candidate policy can be walked on it exactly (the ONNX oracle).

**Candidates.** Every policy of the source bundle, each at a grid of escalation biases
(``trainer.gate_bias``: the gate threshold as one knob, 0 = unchanged).

**What is estimated per candidate**: agreement with the HPC (an escalated decision agrees by
definition; a local one when its label equals the row's ``hpc_label``), escalation rate, mean
cost (training scalar), sensors read, and the local answers' agreement (the drift monitor's
reference). Truth labels never reach the cloud, so a recalibrated point's ``accuracy`` is its
estimated agreement with the HPC (said in ``metadata.recalibration``).

**Rule.** The paired rule (``protocol.operating_points.certified_near``) with the HPC as the
reference: agreement is itself a paired outcome (the HPC agrees with itself on every row), so
the bound is ``paired_lower_bound`` on (agreement - 1) on the Kish effective number of rows —
the same number as agreement's 97.5% Wilson lower bound, minus 1. The cheapest candidate whose
bound reaches the target (default: the deployed point's validation agreement from
``metadata.drift_reference``, else its validation accuracy) minus ``tolerance``. If none does (the usual case
soon after an alarm: a Wilson bound on ~60 effective rows cannot reach 0.99), the one with the
highest bound — and when the deployed point (bias 0 of the point most rows were collected at — the
devices may run another point than the bundle's default — else the default) ties for it, the
deployed point: on evidence that cannot tell candidates apart, recalibration does not trade
the deployed gate for a cheaper one (it still refreshes the drift reference). The new bundle
holds the candidates' Pareto front (agreement vs cost), the chosen one as default, and its
provenance in ``metadata.recalibration``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.audit import AuditPolicy
from adaptedge.protocol.bundle import verify, write_bundle
from adaptedge.protocol.drift_reference import REFERENCE_KEY, reference_from_manifest
from adaptedge.protocol.fleet_rows import LabelledRow
from adaptedge.protocol.manifest import Manifest, OperatingPoint
from adaptedge.protocol.operating_points import (
    PairedCounts,
    certified_near,
    pareto_front,
    wilson_interval,
)
from adaptedge.protocol.policy_graph import PolicyGraph
from adaptedge.trainer.errors import RecalibrationError as RecalibrationError
from adaptedge.trainer.gate_bias import bias_grid, candidate_bundle, escalation_margins
from adaptedge.trainer.policy.oracle import BundleRunner

F64 = npt.NDArray[np.float64]
DEFAULT_TOLERANCE = 0.01


@dataclass(frozen=True)
class RowSample:
    """The source bundle's rows as arrays, with their Horvitz-Thompson weights."""

    X: npt.NDArray[np.float32]
    hpc_label: npt.NDArray[np.int64]
    weight: F64
    counts: dict[str, int]
    time_range: tuple[float, float]

    @property
    def n_effective(self) -> float:
        """Kish's effective sample size (sum w)^2 / sum w^2."""
        return float(self.weight.sum() ** 2 / np.square(self.weight).sum())


def row_sample(rows: Sequence[LabelledRow], manifest: Manifest, audit: AuditPolicy) -> RowSample:
    """The rows of ``manifest``'s bundle, weighted (escalated 1, audit 1/fraction)."""
    mine = [r for r in rows if r.bundle_id == manifest.bundle_id]
    if not mine:
        raise RecalibrationError(f"no labelled rows of bundle {manifest.bundle_id} among "
                                 f"{len(rows)} rows: pass rows stored for this bundle")
    counts = {kind: sum(r.kind == kind for r in mine) for kind in ("escalated", "audit")}
    if not counts["audit"]:
        raise RecalibrationError("no audit rows: local decisions cannot be estimated without "
                                 "them (turn audit sampling on, e.g. a fraction of 0.02)")
    weight = np.ones(len(mine))
    for i, row in enumerate(mine):
        if row.kind == "audit":
            fraction = audit.fraction_at(row.point)
            if fraction <= 0:
                raise RecalibrationError(f"audit row {row.request_id} of {row.device} at point "
                                         f"{row.point} but its audit fraction is 0: pass the "
                                         "fraction the devices used")
            weight[i] = 1.0 / fraction
    X = np.array([r.features for r in mine], dtype=np.float32)
    used = sorted({c for g in manifest.policies.values() for n in g.nodes.values()
                   for c in n.model.inputs})
    if X.shape[1] != len(manifest.feature_names):
        raise RecalibrationError(f"rows have {X.shape[1]} features, the bundle "
                                 f"{len(manifest.feature_names)}")
    if np.isnan(X[:, used]).any():
        raise RecalibrationError("some rows lack features the policies read (NaN): rows must "
                                 "carry every sensor the candidate policies need")
    times = [r.received_at for r in mine]
    return RowSample(np.nan_to_num(X), np.array([r.hpc_label for r in mine], dtype=np.int64),
                     weight, counts, (min(times), max(times)))


@dataclass(frozen=True)
class Estimate:
    """One candidate's figures over all decisions, estimated from the weighted rows."""

    name: str
    source_policy: str
    bias: float
    agreement: float
    escalation_rate: float
    cost: float
    avg_sensors_read: float
    local_agreement: float
    n_local_effective: float

    @property
    def accuracy(self) -> float:  # the pickers of protocol.operating_points rank by it
        return self.agreement


def estimate(runner: BundleRunner, name: str, source: str, bias: float,
             sample: RowSample) -> Estimate:
    result = runner.evaluate(name, sample.X)
    w = sample.weight
    agree = result.escalated | (result.labels == sample.hpc_label)
    local = ~result.escalated
    w_local = w[local]
    n_local = float(w_local.sum() ** 2 / np.square(w_local).sum()) if local.any() else 0.0
    return Estimate(
        name=name, source_policy=source, bias=bias,
        agreement=float(np.average(agree, weights=w)),
        escalation_rate=float(np.average(result.escalated, weights=w)),
        cost=float(np.average(result.cost, weights=w)),
        avg_sensors_read=float(np.average(result.sensors_read.sum(axis=1), weights=w)),
        local_agreement=float(np.average(agree[local], weights=w_local)) if local.any() else 1.0,
        n_local_effective=n_local)


def deployed_point(manifest: Manifest, rows: Sequence[LabelledRow]) -> str:
    """The operating point the devices ran: the one most rows were collected at (a device
    may run another point than the bundle's default, e.g. ``edge run --budget``), else the
    bundle's default."""
    names = [p.name for p in manifest.operating_points]
    counts = Counter(r.point for r in rows if r.point is not None and 0 <= r.point < len(names))
    if not counts:
        return manifest.default_operating_point
    return names[max(sorted(counts), key=lambda i: counts[i])]


def target_agreement(manifest: Manifest, point: str | None = None) -> float:
    """Validation agreement with the HPC of ``point`` (default: the bundle's default point),
    from its drift reference, else its validation accuracy."""
    point = point or manifest.default_operating_point
    ref = reference_from_manifest(manifest, point)
    if ref.local_agreement is None:
        return manifest.operating_point(point).accuracy
    return ref.escalation_rate + (1.0 - ref.escalation_rate) * ref.local_agreement


@dataclass(frozen=True)
class Recalibration:
    manifest: Manifest
    chosen: Estimate
    candidates: list[Estimate]
    target: float
    n_effective: float


def recalibrate(bundle_dir: str | Path, rows: Sequence[LabelledRow], out_dir: str | Path, *,
                audit: AuditPolicy | None = None, tolerance: float = DEFAULT_TOLERANCE,
                target: float | None = None, force: bool = False) -> Recalibration:
    """Estimate every candidate on ``rows``, choose by the rule above and write the new bundle
    to ``out_dir``; ``audit``: the devices' audit policy (for the fractions)."""
    manifest = verify(bundle_dir)
    root = Path(bundle_dir)
    files = {name: (root / name).read_bytes() for name in manifest.files}
    sample = row_sample(rows, manifest, audit or AuditPolicy())
    graphs, extra = _candidates(manifest, files, sample)
    all_files = {**files, **extra}
    runner = BundleRunner.from_files(replace(manifest, policies=graphs), all_files)
    estimates = [estimate(runner, name, source, bias, sample)
                 for name, (source, bias) in _origins(graphs, manifest).items()]
    deployed = deployed_point(manifest, rows)
    goal = target_agreement(manifest, deployed) if target is None else target
    best = _choose(estimates, manifest.operating_point(deployed).policy, goal, tolerance,
                   max(int(sample.n_effective), 1))
    keep = sorted(set(pareto_front(estimates)) | {best}, key=lambda i: estimates[i].cost)
    new = _new_manifest(manifest, [estimates[i] for i in keep], estimates[best], graphs,
                        sample, goal, tolerance)
    used = {new.hpc.file} | {n.model.file for g in new.policies.values() for n in g.nodes.values()}
    written = write_bundle(out_dir, new, {f: all_files[f] for f in sorted(used)}, force=force)
    return Recalibration(written, estimates[best], estimates, goal, sample.n_effective)


def _choose(estimates: list[Estimate], deployed: str, goal: float, tolerance: float,
            n: int) -> int:
    """The rule of the module docstring: an index into ``estimates``."""
    bounds = [agreement_bound(e.agreement, n) for e in estimates]
    margin = tolerance + 1.0 - goal  # bound on (agreement - 1) >= goal - tolerance - 1
    best = certified_near(estimates, bounds, margin, fallback=False)
    if best is not None:
        return best
    top = max(bounds)
    for i, e in enumerate(estimates):
        if e.name == deployed and bounds[i] >= top - 1e-12:
            return i
    fallback = certified_near(estimates, bounds, margin)  # the most agreeing, cheaper on ties
    assert fallback is not None  # at least one candidate
    return fallback


def agreement_bound(agreement: float, n: float) -> float:
    """The paired lower bound on (agreement - 1): the HPC as reference, right on every row."""
    return PairedCounts(both=agreement * n, point_only=0.0, hpc_only=(1.0 - agreement) * n,
                        neither=0.0).lower_bound


def _candidates(manifest: Manifest, files: dict[str, bytes], sample: RowSample
                ) -> tuple[dict[str, PolicyGraph], dict[str, bytes]]:
    runner = BundleRunner.from_files(manifest, files)
    graphs: dict[str, PolicyGraph] = {}
    extra: dict[str, bytes] = {}
    for policy in manifest.policies:
        grid = bias_grid(escalation_margins(runner, manifest.policies[policy], sample.X))
        g, e = candidate_bundle(manifest, files, policy, grid)
        graphs.update(g)
        extra.update(e)
    return graphs, extra


def _origins(graphs: dict[str, PolicyGraph], manifest: Manifest) -> dict[str, tuple[str, float]]:
    """Candidate name -> (source policy, bias), from the ``<policy>@b<bias>`` names."""
    out = {}
    for name in graphs:
        source, _, bias = name.partition("@b")
        assert source in manifest.policies
        out[name] = (source, float(bias) if bias else 0.0)
    return out


def _new_manifest(manifest: Manifest, kept: list[Estimate], chosen: Estimate,
                  graphs: dict[str, PolicyGraph], sample: RowSample, goal: float,
                  tolerance: float) -> Manifest:
    n = max(int(sample.n_effective), 1)
    points = []
    for e in kept:
        source = _source_point(manifest, e.source_policy)
        params: dict[str, float | str] = {**(source.params if source else {}),
                                          "escalation_bias": e.bias}
        points.append(OperatingPoint(
            name=e.name, policy=e.name, accuracy=e.agreement, cost=e.cost,
            escalation_rate=e.escalation_rate, avg_sensors_read=e.avg_sensors_read,
            params=params, accuracy_interval=wilson_interval(e.agreement, n),
            paired_lower_bound=agreement_bound(e.agreement, n)))
    reference = {e.name: {"escalation_rate": e.escalation_rate, "n_rows": n,
                          "local_agreement": e.local_agreement,
                          "n_local": int(e.n_local_effective)} for e in kept}
    provenance: dict[str, Any] = {
        "source_bundle": manifest.bundle_id,
        "rows": dict(sample.counts),
        "received_at": list(sample.time_range),
        "n_effective": round(sample.n_effective, 2),
        "rule": (f"cheapest candidate (policy x escalation bias) whose estimated agreement with "
                 f"the HPC has a paired 97.5% lower bound (the HPC as reference; equal to the "
                 f"Wilson lower bound) on the effective rows >= {goal:.4f} - {tolerance:g}; "
                 f"else the highest agreement, the deployed point when it ties, else the "
                 f"cheaper"),
        "weights": "escalated rows 1, audit rows 1/audit fraction (Horvitz-Thompson)",
        "accuracy_meaning": "operating points' accuracy = estimated agreement with the HPC",
        "chosen": {k: v for k, v in asdict(chosen).items()},
        "source_default": manifest.default_operating_point,
    }
    metadata = {**manifest.metadata, REFERENCE_KEY: reference, "recalibration": provenance}
    return replace(manifest, bundle_id="pending",
                   policies={e.name: graphs[e.name] for e in kept},
                   operating_points=tuple(points), default_operating_point=chosen.name,
                   files={}, metadata=metadata, budget_index=None)


def _source_point(manifest: Manifest, policy: str) -> OperatingPoint | None:
    return next((p for p in manifest.operating_points if p.policy == policy), None)
