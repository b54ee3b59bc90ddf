"""The default-point rule for fronts merged from several methods (``train --method auto``): one
fixed sequence per method, the one-sided alpha split across methods by weighted Bonferroni.

One merged sequence (``operating_points.fixed_sequence``) stops at the first failure, so a
method whose cheap points are good is never reached when another method's point above them
fails. Here each method's own points are tested in fixed sequence (most expensive first) at
its share ``alpha_m`` of the alpha, the shares summing to the alpha; the default is the
cheapest point any sequence certified. The chance that some sequence certifies a point truly
worse than the HPC by more than the tolerance is at most ``sum(alpha_m) = alpha`` (each fixed
sequence holds its own level; the union bound adds them), provided the shares, the points
and their order were fixed without the certify rows. A sequence that certifies every one of
its points passes its share on to the others (Bretz et al.'s graphical procedure, still
family-wise at ``alpha``), so a small front loses little to the split. ``alpha_shares`` fixes them on the
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
    """One method's fixed sequence: its initial share of the alpha, its points (indices into
    the front) in the order tested (most expensive first), the one-sided level each was last
    tested at (its share plus what finished sequences passed on; 0: never reached), each
    one's paired lower bound at that level (``None``: not tested) and how many passed."""

    method: str
    alpha: float
    order: tuple[int, ...]
    levels: tuple[float, ...]
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
    expensive first, ties by position) at its ``shares`` level, stopping at its first bound
    below ``-tolerance``. A sequence whose every point passed hands its level on to the
    unfinished sequences in proportion to their shares, and they go on testing from where
    they stopped: the sequentially rejective graphical procedure of Bretz et al. (2009, Stat
    Med 28:586-604), each method a chain whose last point's edges go to the other chains in
    proportion to their shares (its result does not depend on the order of passes), valid at
    ``sum(shares)``. Methods in first-seen order."""
    if not len(points) == len(counts) == len(methods):
        raise ValueError(f"{len(points)} points, {len(counts)} counts, {len(methods)} methods")
    groups = method_groups(methods)
    chains = [sorted((i for i, m in enumerate(methods) if (m or "") == g),
                     key=lambda i: (-points[i].cost, i)) for g in groups]
    level = [float(shares.get(g, 0.0)) for g in groups]
    at = [0] * len(groups)
    tested = [dict[int, tuple[float, float]]() for _ in groups]  # point: (level, bound there)

    def test(m: int, i: int) -> bool:
        c = counts[i]
        found = paired_lower_bound(c.point_only, c.hpc_only, c.n, alpha=level[m])
        tested[m][i] = (level[m], found)
        return found >= -tolerance

    for _ in range(len(points) + len(groups)):  # each round passes a point or ends a chain
        moved = False
        for m, chain in enumerate(chains):
            while at[m] < len(chain) and level[m] > 0.0:
                if not test(m, chain[at[m]]):
                    break
                at[m], moved = at[m] + 1, True
            if at[m] == len(chain) and level[m] > 0.0:
                _hand_on(m, level, [k for k, c in enumerate(chains) if at[k] < len(c)],
                         [float(shares.get(g, 0.0)) for g in groups])
                moved = True
        if not moved:
            break
    return [MethodSequence(g, float(shares.get(g, 0.0)), tuple(chain),
                           tuple(tested[m][i][0] if i in tested[m] else 0.0 for i in chain),
                           tuple(tested[m][i][1] if i in tested[m] else None for i in chain),
                           at[m])
            for m, (g, chain) in enumerate(zip(groups, chains, strict=True))]


def _hand_on(done: int, level: list[float], open_: list[int], shares: list[float]) -> None:
    """A finished sequence's level to the unfinished ones (``open_``), in proportion to their
    initial ``shares``; unused when they all have share 0 (the graph's edges are
    proportional to the shares: a method with share 0 is never tested)."""
    total = sum(shares[k] for k in open_)
    if total <= 0.0:
        return
    for k in open_:
        level[k] += level[done] * shares[k] / total
    level[done] = 0.0


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
    re-check them: per method its alpha share, its points by name in the order tested, the
    level each was last tested at, its bound at that level and how many passed."""
    return {"alpha": sum(s.alpha for s in sequences), "tolerance": tolerance,
            "methods": {s.method: {"alpha": s.alpha, "points": [names[i] for i in s.order],
                                   "levels": list(s.levels), "bounds": list(s.bounds),
                                   "passed": s.passed}
                        for s in sequences}}
