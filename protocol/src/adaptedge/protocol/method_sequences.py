"""The default-point rule for fronts merged from several methods (``train --method auto``): one
fixed sequence per method, the one-sided alpha split across methods by weighted Bonferroni.

One merged sequence (``operating_points.fixed_sequence``) stops at the first failure, so a
method whose cheap points are good is never reached when another method's point above them
fails. Here each method's own points are tested in fixed sequence (most expensive first) at
its share ``alpha_m`` of the alpha, the shares summing to the alpha; the default is the
cheapest point any sequence certified. The chance that some sequence certifies a point truly
worse than the HPC by more than the tolerance is at most ``sum(alpha_m) = alpha`` (each fixed
sequence holds its own level; the union bound adds them), provided the shares, the points
and their order were fixed without the certify rows. ``alpha_shares`` fixes them on the
selection rows only: half the alpha to the method whose cheapest screened point (selection
accuracy within half the tolerance of the HPC's) is cheapest, the other half equally to the
other methods with a screened point; with no screened point at all, equal shares. A front
from one method gets the whole alpha: exactly ``fixed_sequence``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adaptedge.protocol.operating_points import PairedCounts, Scored, paired_lower_bound

ALPHA = 0.025
"""The one-sided family-wise level of the default-point rule (the 97.5% bound)."""
SEQUENCES_KEY = "certify_sequences"
"""The manifest metadata key of ``sequences_record``."""
LEADER_SHARE = 0.5
"""The share of the alpha given to the selection rows' most promising method."""


def method_groups(methods: Sequence[str | None]) -> list[str]:
    """The distinct method names in first-seen order (an unrecorded method counts as ``""``)."""
    return list(dict.fromkeys(m or "" for m in methods))


def alpha_shares(points: Sequence[Scored], methods: Sequence[str | None],
                 hpc_accuracy: float, tolerance: float, alpha: float = ALPHA
                 ) -> dict[str, float]:
    """Each method's share of ``alpha``, fixed on the SELECTION rows only (``points``: each
    point's accuracy and cost there; ``hpc_accuracy``: the HPC's on the same rows). Screened:
    a point whose accuracy is >= ``hpc_accuracy - tolerance / 2``. The leader (the method of
    the cheapest screened point, the more accurate on ties, then the first) gets
    ``LEADER_SHARE`` of ``alpha`` and the other methods with a screened point share the rest
    equally (the leader all when it is the only one; methods without one get 0). No screened
    point: every method an equal share. One method: all of ``alpha``."""
    if len(methods) != len(points):
        raise ValueError(f"{len(methods)} methods for {len(points)} points")
    groups = method_groups(methods)
    if len(groups) <= 1:
        return {g: alpha for g in groups}
    screened = [i for i, p in enumerate(points) if p.accuracy >= hpc_accuracy - tolerance / 2]
    if not screened:
        return {g: alpha / len(groups) for g in groups}
    leader = methods[min(screened, key=lambda i: (points[i].cost, -points[i].accuracy, i))]
    others = [g for g in method_groups([methods[i] for i in screened]) if g != (leader or "")]
    shares = {g: 0.0 for g in groups}
    shares[leader or ""] = alpha if not others else alpha * LEADER_SHARE
    for g in others:
        shares[g] = alpha * (1.0 - LEADER_SHARE) / len(others)
    return shares


@dataclass(frozen=True, slots=True)
class MethodSequence:
    """One method's fixed sequence: its share of the alpha, its points (indices into the
    front) in the order tested (most expensive first), each one's paired lower bound at that
    share (``None``: share 0, not tested), and how many passed before the first failure."""

    method: str
    alpha: float
    order: tuple[int, ...]
    bounds: tuple[float | None, ...]
    passed: int

    @property
    def certified(self) -> tuple[int, ...]:
        return self.order[: self.passed]


def method_sequences(points: Sequence[Scored], counts: Sequence[PairedCounts],
                     methods: Sequence[str | None], shares: Mapping[str, float],
                     tolerance: float) -> list[MethodSequence]:
    """Each method's fixed sequence on the certify rows (``counts``: each point's paired
    outcomes there; ``points``: costs fixed on the selection rows give the order, most
    expensive first, ties by position), tested at its ``shares`` level; stop at the first
    bound below ``-tolerance``. Methods in first-seen order."""
    if not len(points) == len(counts) == len(methods):
        raise ValueError(f"{len(points)} points, {len(counts)} counts, {len(methods)} methods")
    out = []
    for group in method_groups(methods):
        alpha = float(shares.get(group, 0.0))
        order = sorted((i for i, m in enumerate(methods) if (m or "") == group),
                       key=lambda i: (-points[i].cost, i))
        bounds: list[float | None] = [
            None if alpha <= 0.0 else paired_lower_bound(counts[i].point_only,
                                                         counts[i].hpc_only, counts[i].n,
                                                         alpha=alpha) for i in order]
        passed = 0
        for bound in bounds:
            if bound is None or bound < -tolerance:
                break
            passed += 1
        out.append(MethodSequence(group, alpha, tuple(order), tuple(bounds), passed))
    return out


def cheapest_certified(points: Sequence[Scored], sequences: Sequence[MethodSequence]
                       ) -> tuple[int, MethodSequence] | None:
    """The cheapest point any sequence certified (the more accurate on ties, then the first)
    and the sequence that certified it; ``None`` when none did."""
    found = [(i, s) for s in sequences for i in s.certified]
    if not found:
        return None
    return min(found, key=lambda f: (points[f[0]].cost, -points[f[0]].accuracy, f[0]))


def sequences_record(sequences: Sequence[MethodSequence], names: Sequence[str],
                     tolerance: float) -> dict[str, object]:
    """The manifest's record of the sequences (``metadata["certify_sequences"]``), enough to
    re-check them: per method its alpha share, its points by name in the order tested, each
    one's bound at that share and how many passed."""
    return {"alpha": sum(s.alpha for s in sequences), "tolerance": tolerance,
            "methods": {s.method: {"alpha": s.alpha, "points": [names[i] for i in s.order],
                                   "bounds": list(s.bounds), "passed": s.passed}
                        for s in sequences}}
