"""The one Pareto front and the operating-point pickers (trainer, ``adaptedge evaluate``, edge),
and the paired non-inferiority rule that picks the default point (``certified_near``: paired
bounds tested in a fixed sequence, ``fixed_sequence``).

They work on any records with ``accuracy`` and ``cost`` (``manifest.OperatingPoint``, the
trainer's ``Metrics``, ...) and answer with indices into the sequence given, so each caller
keeps its own objects and raises its own error when nothing fits. Ties keep the earlier record.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Protocol


class Scored(Protocol):
    """Anything with an expected accuracy and a mean cost."""

    @property
    def accuracy(self) -> float: ...

    @property
    def cost(self) -> float: ...


def pareto_front(points: Sequence[Scored]) -> list[int]:
    """Indices of the points no other point beats (>= accuracy and <= cost, one strictly),
    cost ascending and accuracy strictly rising; of equal points the first is kept."""
    order = sorted(range(len(points)), key=lambda i: (points[i].cost, -points[i].accuracy, i))
    keep: list[int] = []
    for i in order:
        if not keep or points[i].accuracy > points[keep[-1]].accuracy:
            keep.append(i)
    return keep


def most_accurate(points: Sequence[Scored]) -> int | None:
    """The most accurate point, the cheaper on ties (``None``: no points)."""
    if not points:
        return None
    return min(range(len(points)), key=lambda i: (-points[i].accuracy, points[i].cost, i))


def within_budget(points: Sequence[Scored], budget: float) -> int | None:
    """The most accurate point whose cost is <= ``budget``, the cheaper on ties (``None``:
    nothing fits, or the budget is NaN). The device's budget lookup."""
    if math.isnan(budget):
        return None
    fitting = [i for i, p in enumerate(points) if p.cost <= budget]
    best = most_accurate([points[i] for i in fitting])
    return None if best is None else fitting[best]


def cheapest_reaching(points: Sequence[Scored], min_accuracy: float) -> int | None:
    """The cheapest point with accuracy >= ``min_accuracy``, the more accurate on ties
    (``None``: none reaches it)."""
    good = [i for i, p in enumerate(points) if p.accuracy >= min_accuracy]
    if not good:
        return None
    return min(good, key=lambda i: (points[i].cost, -points[i].accuracy, i))


def cheapest(points: Sequence[Scored]) -> int | None:
    """The cheapest point (``None``: no points)."""
    if not points:
        return None
    return min(range(len(points)), key=lambda i: (points[i].cost, -points[i].accuracy, i))


def short_labels(points: Sequence[Scored]) -> list[str]:
    """Short readable labels P1, P2, ... numbered from the cheapest, in the order given (tables
    and plots show them beside the full names)."""
    order = sorted(range(len(points)), key=lambda i: (points[i].cost, -points[i].accuracy, i))
    labels = [""] * len(points)
    for rank, i in enumerate(order, start=1):
        labels[i] = f"P{rank}"
    return labels


# -- the default operating point: as good as the HPC within a tolerance, with confidence -------
CONFIDENCE = 0.95
"""Level of the two-sided Wilson interval stored with each operating point; the default point
is chosen by its lower end (a one-sided 97.5% lower confidence bound)."""
_Z = 1.959963984540054  # standard normal quantile at 1 - (1 - CONFIDENCE) / 2


def wilson_interval(accuracy: float, n_rows: int) -> tuple[float, float]:
    """The Wilson score interval at ``CONFIDENCE`` of an accuracy measured on ``n_rows`` rows
    (``(0, 1)`` when ``n_rows`` is 0)."""
    if n_rows <= 0:
        return 0.0, 1.0
    p = min(max(float(accuracy), 0.0), 1.0)
    z2 = _Z * _Z / n_rows
    centre = (p + z2 / 2) / (1 + z2)
    half = _Z * math.sqrt(p * (1 - p) / n_rows + z2 / (4 * n_rows)) / (1 + z2)
    return max(0.0, centre - half), min(1.0, centre + half)


def confidently_near(points: Sequence[Scored], reference: float, tolerance: float,
                     n_rows: int, *, fallback: bool = True) -> int | None:
    """The older *marginal* rule, kept for the benchmarks that store only point estimates:
    the cheapest point whose accuracy's Wilson lower bound on ``n_rows`` validation rows is
    >= ``reference - tolerance``, the more accurate on ties; when none is, with ``fallback``
    the point with the highest lower bound (the cheaper on ties), else ``None``. ``None``
    also when there are no points. It ignores that the point and the reference were measured
    on the same rows: below ~750 rows near 98% nothing passes. The trainer, ``adaptedge
    evaluate`` and recalibration use ``certified_near``."""
    lower = [_Bound(wilson_interval(p.accuracy, n_rows)[0], p.cost) for p in points]
    best = cheapest_reaching(lower, reference - tolerance)
    return most_accurate(lower) if best is None and fallback else best


class _Bound:
    """A point scored by its accuracy's lower confidence bound."""

    __slots__ = ("accuracy", "cost")

    def __init__(self, accuracy: float, cost: float) -> None:
        self.accuracy = accuracy
        self.cost = cost


# -- the paired rule: non-inferior to the HPC on the same validation rows ----------------------
@dataclass(frozen=True, slots=True)
class PairedCounts:
    """A point's and the HPC's outcomes on the same rows: how many both got right, only the
    point, only the HPC, neither. Floats allowed (weighted rows: effective counts)."""

    both: float
    point_only: float
    hpc_only: float
    neither: float

    @classmethod
    def of(cls, point_right: Iterable[bool], hpc_right: Iterable[bool]) -> PairedCounts:
        """Counted from per-row outcomes (booleans or 0/1, same rows in the same order)."""
        cells = [0, 0, 0, 0]
        for p, h in zip(point_right, hpc_right, strict=True):
            cells[(0 if p else 2) + (0 if h else 1)] += 1
        both, point_only, hpc_only, neither = cells
        return cls(both, point_only, hpc_only, neither)

    @property
    def n(self) -> float:
        return self.both + self.point_only + self.hpc_only + self.neither

    @property
    def difference(self) -> float:
        """The point's accuracy minus the HPC's on these rows (0 on no rows)."""
        return (self.point_only - self.hpc_only) / self.n if self.n > 0 else 0.0

    @property
    def lower_bound(self) -> float:
        """``paired_lower_bound`` of these counts."""
        return paired_lower_bound(self.point_only, self.hpc_only, self.n)


def _z(alpha: float) -> float:
    """The one-sided standard normal quantile at ``1 - alpha`` (``_Z`` at 0.025)."""
    if alpha == 0.025:
        return _Z
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha:g}")
    return NormalDist().inv_cdf(1.0 - alpha)


def _tango_statistic(delta: float, b: float, c: float, n: float) -> float:
    """Tango's (1998) score statistic for H0: accuracy difference = ``delta`` (``b``: rows only
    the point got right, ``c``: only the HPC, ``n``: all rows), with the restricted maximum
    likelihood estimate of the HPC-only probability."""
    a2 = 2.0 * n
    b2 = -b - c + (2.0 * n - b + c) * delta
    c2 = -c * delta * (1.0 - delta)
    q21 = (math.sqrt(max(b2 * b2 - 4.0 * a2 * c2, 0.0)) - b2) / (2.0 * a2)
    variance = n * (2.0 * q21 + delta * (1.0 - delta))
    gap = b - c - n * delta
    if variance <= 0.0:
        return math.copysign(math.inf, gap) if gap else 0.0
    return gap / math.sqrt(variance)


def paired_lower_bound(point_only: float, hpc_only: float, n: float, *,
                       alpha: float = 0.025) -> float:
    """One-sided 97.5% lower confidence bound on (the point's accuracy - the HPC's), measured on
    the same ``n`` rows, from the discordant pairs: the lower end of Tango's asymptotic score
    interval (95% two-sided; Tango 1998, Stat Med 17:891-908). -1 on no rows. With the HPC
    exactly right on every row (``point_only`` 0, as for agreement with the HPC) it equals the
    Wilson lower bound of the point's accuracy, minus 1. ``alpha``: another one-sided level
    (``1 - alpha``; e.g. a Bonferroni share)."""
    z = _z(alpha)
    if n <= 0:
        return -1.0
    estimate = (point_only - hpc_only) / n
    if estimate <= -1.0:
        return -1.0
    low, high = -1.0, estimate  # the statistic falls as delta rises: bisect for it = z
    for _ in range(64):
        mid = (low + high) / 2.0
        if _tango_statistic(mid, point_only, hpc_only, n) > z:
            low = mid
        else:
            high = mid
    return low


def fixed_sequence(points: Sequence[Scored], bounds: Sequence[float | None],
                   tolerance: float, order: Sequence[float] | None = None) -> list[int]:
    """The points certified by fixed-sequence testing (Learn then Test, Angelopoulos et al.
    2021): test the points one at a time in descending ``order`` (default: each point's cost,
    a key that does not look at labels; ties by position), each with its own paired bound
    (``bounds[i] >= -tolerance``; ``None`` fails), and stop at the first failure. Indices in
    the order tested. Every point before the first failure is certified together: the chance
    that any point truly worse than the HPC by more than ``tolerance`` is among them is at most
    2.5% however many points there are (no Bonferroni penalty), provided ``order`` was fixed
    without the labels the bounds were measured on."""
    if len(bounds) != len(points):
        raise ValueError(f"{len(bounds)} bounds for {len(points)} points")
    keys = [p.cost for p in points] if order is None else list(order)
    if len(keys) != len(points):
        raise ValueError(f"{len(keys)} order keys for {len(points)} points")
    passed: list[int] = []
    for i in sorted(range(len(points)), key=lambda k: (-keys[k], k)):
        bound = bounds[i]
        if bound is None or bound < -tolerance:
            break
        passed.append(i)
    return passed


def certified_near(points: Sequence[Scored], bounds: Sequence[float | None], tolerance: float,
                   *, fallback: bool = True, sequential: bool = True,
                   order: Sequence[float] | None = None) -> int | None:
    """THE rule for the default operating point (trainer, ``adaptedge evaluate``,
    recalibration): the cheapest point certified within ``tolerance`` of the reference, the
    more accurate on ties. ``bounds[i]``: the point's paired lower bound (see
    ``paired_lower_bound``; ``None``: unknown, never certified). Certified means passed by
    ``fixed_sequence`` (most expensive first, or descending ``order``; stop at the first bound
    below ``-tolerance``); ``sequential=False``: the older per-point rule, any point whose
    bound is >= ``-tolerance`` (the cheapest of many lucky passes: it does not hold under
    selection; kept for comparison). When none is certified, with ``fallback`` the most
    accurate point (the cheaper on ties), else ``None``; ``None`` also when there are no points.

    The bound is on the difference from the reference on the same validation rows, so it
    counts the reference's own estimation error and only the rows where the two disagree."""
    if len(bounds) != len(points):
        raise ValueError(f"{len(bounds)} bounds for {len(points)} points")
    if sequential:
        good = fixed_sequence(points, bounds, tolerance, order)
    else:
        good = [i for i, b in enumerate(bounds) if b is not None and b >= -tolerance]
    if good:
        return min(good, key=lambda i: (points[i].cost, -points[i].accuracy, i))
    return most_accurate(points) if fallback else None


def rows_to_certify(counts: PairedCounts, tolerance: float, *, limit: int = 10**9) -> int | None:
    """The fewest rows at which a point with these per-row rates (the same discordance) would
    be certified (``paired_lower_bound >= -tolerance``); ``None`` when no number up to
    ``limit`` would (its observed difference is ``-tolerance`` or worse)."""
    n = counts.n
    if n <= 0 or counts.difference <= -tolerance:
        return None
    b, c = counts.point_only / n, counts.hpc_only / n

    def ok(rows: int) -> bool:
        return paired_lower_bound(b * rows, c * rows, rows) >= -tolerance

    high = 1
    while not ok(high):
        if high >= limit:
            return None
        high = min(2 * high, limit)
    low = high // 2  # ok(high), not ok(low) unless low == 0
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if ok(mid) else (mid, high)
    return high
