"""The one Pareto front and the operating-point pickers (trainer, ``adaptedge evaluate``, edge).

They work on any records with ``accuracy`` and ``cost`` (``manifest.OperatingPoint``, the
trainer's ``Metrics``, ...) and answer with indices into the sequence given, so each caller
keeps its own objects and raises its own error when nothing fits. Ties keep the earlier record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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
    """THE rule for the default operating point (trainer, ``adaptedge evaluate``, benchmarks):
    the cheapest point whose accuracy's Wilson lower bound on ``n_rows`` validation rows is
    >= ``reference - tolerance``, the more accurate on ties; when none is, with ``fallback``
    the point with the highest lower bound (the cheaper on ties), else ``None``. ``None``
    also when there are no points.

    Choosing by the point estimate picks, among many candidates, the ones validation happens
    to flatter; the lower bound asks for a margin that shrinks as validation grows."""
    lower = [_Bound(wilson_interval(p.accuracy, n_rows)[0], p.cost) for p in points]
    best = cheapest_reaching(lower, reference - tolerance)
    return most_accurate(lower) if best is None and fallback else best


class _Bound:
    """A point scored by its accuracy's lower confidence bound."""

    __slots__ = ("accuracy", "cost")

    def __init__(self, accuracy: float, cost: float) -> None:
        self.accuracy = accuracy
        self.cost = cost
