"""The validation frontier of a method's graphs and the choice of one within a budget.

The front and the pickers are ``protocol.operating_points``'s (shared with ``adaptedge
evaluate`` and the device's budget lookup), applied to each graph's validation metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from adaptedge.protocol.operating_points import certified_near, pareto_front, within_budget
from adaptedge.trainer.errors import BudgetError as BudgetError
from adaptedge.trainer.policy.graph import Metrics


class Validated(Protocol):
    """Anything carrying validation ``Metrics`` (a ``Graph``, a DAG sweep point)."""

    @property
    def validation(self) -> Metrics: ...


V = TypeVar("V", bound=Validated)


class Front(list[V]):
    """A validation front that remembers how many candidates it was kept from (``swept``), so
    ``adaptedge train`` can say "kept 39 of 1,728" even when a method prunes its own sweep."""

    swept: int
    metadata: dict[str, Any]
    """What the method adds to the bundle's metadata (e.g. ``auto``'s plan); empty for most."""

    def __init__(self, points: Sequence[V], swept: int) -> None:
        super().__init__(points)
        self.swept = swept
        self.metadata = {}


def pareto_frontier(points: Sequence[V]) -> Front[V]:
    """The points no other point beats on validation: cost ascending, accuracy strictly rising
    (of equal points the first is kept). ``swept`` counts the candidates walked: a front of a
    front keeps the first count."""
    swept = points.swept if isinstance(points, Front) else len(points)
    return Front([points[i] for i in pareto_front([p.validation for p in points])], swept)


def kept_summary(kept: int, swept: int) -> str:
    """Why the bundle holds ``kept`` of ``swept`` candidate policies, in words."""
    if kept >= swept:
        return f"kept all {swept} candidate policies: none is dominated on validation"
    return (f"kept {kept} of {swept} candidate policies: each of the other {swept - kept} "
            f"costs as much or more on validation for no higher validation accuracy "
            f"(dominated)")


def pick_within_budget(points: Sequence[V], budget: float) -> V:
    """The most accurate point whose validation cost is <= ``budget`` (cheaper on ties)."""
    if not points:
        raise BudgetError("no operating points to choose from")
    best = within_budget([p.validation for p in points], budget)
    if best is None:
        cheapest = min(p.validation.cost for p in points)
        raise BudgetError(f"no operating point costs <= {budget:g} on validation; the cheapest "
                          f"costs {cheapest:.4g}: raise --budget to at least that")
    return points[best]


def pick_certified(points: Sequence[V], bounds: Sequence[float], tolerance: float = 0.01) -> V:
    """The default operating point (``protocol.operating_points.certified_near``): the
    cheapest certified by the fixed sequence of paired lower bounds on (its validation accuracy
    - the HPC's), ``bounds[i]`` (most expensive first, stop at the first below
    ``-tolerance``), else the most accurate on validation (the cheaper on ties)."""
    if not points:
        raise BudgetError("no operating points to choose from")
    best = certified_near([p.validation for p in points], bounds, tolerance)
    assert best is not None
    return points[best]
