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
