"""The validation frontier of operating points and the choice of one within a budget."""

from __future__ import annotations

from collections.abc import Sequence

from adaptedge.trainer.policy import PolicyExport


class BudgetError(ValueError):
    """No operating point fits the budget."""


def pareto_frontier(points: Sequence[PolicyExport]) -> list[PolicyExport]:
    """The points no other point beats on validation: cost ascending, accuracy strictly rising.

    Ties in cost keep the more accurate point; ties in both keep the first by name.
    """
    ordered = sorted(points, key=lambda p: (p.validation.cost, -p.validation.accuracy, p.name))
    frontier: list[PolicyExport] = []
    for point in ordered:
        if not frontier or point.validation.accuracy > frontier[-1].validation.accuracy:
            frontier.append(point)
    return frontier


def pick_within_budget(points: Sequence[PolicyExport], budget: float) -> PolicyExport:
    """The most accurate point whose validation cost is <= ``budget`` (cheaper on ties)."""
    if not points:
        raise BudgetError("no operating points to choose from")
    fitting = [p for p in points if p.validation.cost <= budget]
    if not fitting:
        cheapest = min(p.validation.cost for p in points)
        raise BudgetError(f"no operating point costs <= {budget:g} on validation; the cheapest "
                          f"costs {cheapest:.4g}: raise --budget to at least that")
    return max(fitting, key=lambda p: (p.validation.accuracy, -p.validation.cost))


def pick_near_accuracy(points: Sequence[PolicyExport], reference: float,
                       tolerance: float = 0.01) -> PolicyExport:
    """The cheapest point with validation accuracy >= ``reference - tolerance``, else the most
    accurate (the default operating point: as good as the HPC within 1%, as cheap as can be)."""
    if not points:
        raise BudgetError("no operating points to choose from")
    good = [p for p in points if p.validation.accuracy >= reference - tolerance]
    if good:
        return min(good, key=lambda p: (p.validation.cost, -p.validation.accuracy))
    return max(points, key=lambda p: (p.validation.accuracy, -p.validation.cost))
