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
from adaptedge.protocol.device_bundle import require_hpc
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
DEFAULT_MAX_DEVICE_SHARE = 0.25
"""No device holds more than this share of the weighted rows (``cap_device_weights``)."""


@dataclass(frozen=True)
class RowSample:
    """The source bundle's rows as arrays, with their Horvitz-Thompson weights (each device's
    capped, ``cap_device_weights``); ``device`` indexes ``devices``; ``fractions``: audit rows
    by where their fraction came from (``stored`` with the row, ``assumed`` from the caller);
    ``left_out``: escalated rows of devices that audited nothing at their point."""

    X: npt.NDArray[np.float32]
    hpc_label: npt.NDArray[np.int64]
    weight: F64
    counts: dict[str, int]
    time_range: tuple[float, float]
    device: npt.NDArray[np.intp]
    devices: tuple[str, ...]
    shares: dict[str, tuple[float, float]]
    fractions: dict[str, int]
    left_out: int

    @property
    def n_effective(self) -> float:
        """Kish's effective sample size (sum w)^2 / sum w^2."""
        return float(self.weight.sum() ** 2 / np.square(self.weight).sum())

    @property
    def n_robust(self) -> float:
        """The smallest Kish size of the sample and of it without any one device."""
        w, q = (np.bincount(self.device, weights=v, minlength=len(self.devices))
                for v in (self.weight, np.square(self.weight)))
        rest_w, rest_q = w.sum() - w, q.sum() - q
        keep = rest_q > 0
        return float(min([self.n_effective, *(rest_w[keep] ** 2 / rest_q[keep])]))


def row_sample(rows: Sequence[LabelledRow], manifest: Manifest, audit: AuditPolicy | None,
               max_device_share: float = DEFAULT_MAX_DEVICE_SHARE) -> RowSample:
    """The rows of ``manifest``'s bundle, weighted (escalated 1, audit 1/fraction: the row's
    stored fraction, else ``audit``'s), each device's weight capped at ``max_device_share``."""
    mine = [r for r in rows if r.bundle_id == manifest.bundle_id]
    if not mine:
        raise RecalibrationError(f"no labelled rows of bundle {manifest.bundle_id} among "
                                 f"{len(rows)} rows: pass rows stored for this bundle")
    kept = [r for r in mine if not (r.kind == "escalated" and r.audit_fraction == 0.0)]
    counts = {kind: sum(r.kind == kind for r in kept) for kind in ("escalated", "audit")}
    if not counts["audit"]:
        raise RecalibrationError("no audit rows: local decisions cannot be estimated without "
                                 "them (turn audit sampling on, e.g. a fraction of 0.02)")
    raw, fractions = _weights(kept, audit)
    devices = tuple(sorted({r.device for r in kept}))
    index = {d: i for i, d in enumerate(devices)}
    device = np.array([index[r.device] for r in kept], dtype=np.intp)
    weight, shares = cap_device_weights(raw, device, max_device_share)
    X = np.array([r.features for r in kept], dtype=np.float32)
    used = sorted({c for g in manifest.policies.values() for n in g.nodes.values()
                   for c in n.model.inputs})
    if X.shape[1] != len(manifest.feature_names):
        raise RecalibrationError(f"rows have {X.shape[1]} features, the bundle "
                                 f"{len(manifest.feature_names)}")
    if np.isnan(X[:, used]).any():
        raise RecalibrationError("some rows lack features the policies read (NaN): rows must "
                                 "carry every sensor the candidate policies need")
    times = [r.received_at for r in kept]
    return RowSample(np.nan_to_num(X), np.array([r.hpc_label for r in kept], dtype=np.int64),
                     weight, counts, (min(times), max(times)), device, devices,
                     {d: shares[i] for i, d in enumerate(devices)}, fractions,
                     len(mine) - len(kept))


def _weights(rows: Sequence[LabelledRow], audit: AuditPolicy | None
             ) -> tuple[F64, dict[str, int]]:
    """Horvitz-Thompson weights (escalated 1, audit 1/fraction) and the audit rows by where
    their fraction came from. The fraction a row carries is the one its device used; a row
    without one (stored before devices sent it) takes ``audit``'s."""
    weight = np.ones(len(rows))
    fractions = {"stored": 0, "assumed": 0}
    missing = 0
    for i, row in enumerate(rows):
        if row.kind != "audit":
            continue
        if row.audit_fraction is not None:
            fraction = row.audit_fraction
            fractions["stored"] += 1
        elif audit is not None:
            fraction = audit.fraction_at(row.point)
            fractions["assumed"] += 1
        else:
            missing += 1
            continue
        if not 0.0 < fraction <= 1.0:
            raise RecalibrationError(f"audit row {row.request_id} of {row.device} at point "
                                     f"{row.point}: its audit fraction is {fraction:g}, not in "
                                     "(0, 1]: pass the fraction the devices used "
                                     "(--audit-fraction)")
        weight[i] = 1.0 / fraction
    if missing:
        raise RecalibrationError(f"{missing} audit rows carry no audit fraction (stored before "
                                 "devices sent it): pass the fraction those devices used "
                                 "(--audit-fraction)")
    return weight, fractions


def cap_device_weights(weight: F64, device: npt.NDArray[np.intp], max_share: float
                       ) -> tuple[F64, list[tuple[float, float]]]:
    """``weight`` with each device's rows scaled so that no device holds more than
    ``max(max_share, 1 / devices)`` of the total: the devices above the cap are brought down
    to one common total ``C = share * (others' total) / (1 - capped * share)``, the others keep
    theirs. Also each device's (share before, share after)."""
    totals = np.bincount(device, weights=weight)
    k = totals.size
    share = max(max_share, 1.0 / k)
    order = np.sort(totals)[::-1]
    cap = float(order[0])
    rest = float(order.sum())
    for capped in range(k):
        if capped:
            rest -= float(order[capped - 1])
        limit = share * rest / (1.0 - capped * share) if capped * share < 1.0 else 0.0
        if order[capped] <= limit * (1 + 1e-12):
            cap = limit
            break
    scale = np.minimum(1.0, cap / totals)
    out = weight * scale[device]
    after = totals * scale
    shares = [(float(t / totals.sum()), float(a / after.sum())) for t, a in zip(
        totals, after, strict=True)]
    return out, shares


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
    robust_agreement: float | None = None
    """The lowest of ``agreement`` and its estimates without any one device (None: not
    computed, ``agreement``)."""

    @property
    def accuracy(self) -> float:  # the pickers of protocol.operating_points rank by it
        return self.agreement if self.robust_agreement is None else self.robust_agreement


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
        n_local_effective=n_local, robust_agreement=_robust(agree, sample))


def _robust(agree: npt.NDArray[np.bool_], sample: RowSample) -> float:
    """The lowest weighted agreement among all rows and all rows but one device's: no single
    device can make a candidate look better than the rest of the fleet does."""
    k = len(sample.devices)
    w = np.bincount(sample.device, weights=sample.weight, minlength=k)
    s = np.bincount(sample.device, weights=sample.weight * agree, minlength=k)
    full = float(s.sum() / w.sum())
    rest = w.sum() - w
    keep = rest > 0
    return float(min([full, *((s.sum() - s[keep]) / rest[keep])]))


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
                target: float | None = None, force: bool = False,
                max_device_share: float = DEFAULT_MAX_DEVICE_SHARE) -> Recalibration:
    """Estimate every candidate on ``rows``, choose by the rule above and write the new bundle
    to ``out_dir``; ``audit``: the devices' audit policy, for rows that do not carry their
    audit fraction (None: every audit row must carry it)."""
    manifest = verify(bundle_dir)
    require_hpc(manifest, bundle_dir, "recalibration (its estimates walk the HPC)")
    root = Path(bundle_dir)
    files = {name: (root / name).read_bytes() for name in manifest.files}
    sample = row_sample(rows, manifest, audit, max_device_share)
    graphs, extra = _candidates(manifest, files, sample)
    all_files = {**files, **extra}
    runner = BundleRunner.from_files(replace(manifest, policies=graphs), all_files)
    estimates = [estimate(runner, name, source, bias, sample)
                 for name, (source, bias) in _origins(graphs, manifest).items()]
    deployed = deployed_point(manifest, rows)
    goal = target_agreement(manifest, deployed) if target is None else target
    best = _choose(estimates, manifest.operating_point(deployed).policy, goal, tolerance,
                   max(int(sample.n_robust), 1))
    keep = sorted(set(pareto_front(estimates)) | {best}, key=lambda i: estimates[i].cost)
    new = _new_manifest(manifest, [estimates[i] for i in keep], estimates[best], graphs,
                        sample, goal, tolerance)
    used = {new.hpc.file} | {n.model.file for g in new.policies.values() for n in g.nodes.values()}
    written = write_bundle(out_dir, new, {f: all_files[f] for f in sorted(used)}, force=force)
    return Recalibration(written, estimates[best], estimates, goal, sample.n_effective)


def _choose(estimates: list[Estimate], deployed: str, goal: float, tolerance: float,
            n: int) -> int:
    """The rule of the module docstring: an index into ``estimates``."""
    bounds = [agreement_bound(e.accuracy, n) for e in estimates]  # leave-one-device-out
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
            paired_lower_bound=agreement_bound(e.agreement, n),
            method=source.method if source else None))
    reference = {e.name: {"escalation_rate": e.escalation_rate, "n_rows": n,
                          "local_agreement": e.local_agreement,
                          "n_local": int(e.n_local_effective)} for e in kept}
    provenance: dict[str, Any] = {
        "source_bundle": manifest.bundle_id,
        "rows": dict(sample.counts),
        "received_at": list(sample.time_range),
        "n_effective": round(sample.n_effective, 2),
        "rule": (f"cheapest candidate (policy x escalation bias) whose estimated agreement with "
                 f"the HPC (the lowest of the estimate and the estimates without any one "
                 f"device) has a paired 97.5% lower bound (the HPC as reference; equal to the "
                 f"Wilson lower bound) on the effective rows >= {goal:.4f} - {tolerance:g}; "
                 f"else the highest agreement, the deployed point when it ties, else the "
                 f"cheaper"),
        "weights": "escalated rows 1, audit rows 1/audit fraction (Horvitz-Thompson); each "
                   "device's total capped at a share of the whole (max(cap, 1/devices))",
        "audit_fractions": dict(sample.fractions),
        "left_out_rows": sample.left_out,
        "devices": {d: {"share_before_cap": round(before, 4), "share": round(after, 4)}
                    for d, (before, after) in _largest(sample.shares)},
        "accuracy_meaning": "operating points' accuracy = estimated agreement with the HPC",
        "chosen": {k: v for k, v in asdict(chosen).items()},
        "source_default": manifest.default_operating_point,
    }
    metadata = {**manifest.metadata, REFERENCE_KEY: reference, "recalibration": provenance}
    return replace(manifest, bundle_id="pending",
                   policies={e.name: graphs[e.name] for e in kept},
                   operating_points=tuple(points), default_operating_point=chosen.name,
                   files={}, metadata=metadata, budget_index=None)


def _largest(shares: dict[str, tuple[float, float]], n: int = 20
             ) -> list[tuple[str, tuple[float, float]]]:
    """The ``n`` devices with the largest shares before the cap (the provenance's list)."""
    return sorted(shares.items(), key=lambda kv: (-kv[1][0], kv[0]))[:n]


def _source_point(manifest: Manifest, policy: str) -> OperatingPoint | None:
    return next((p for p in manifest.operating_points if p.policy == policy), None)
