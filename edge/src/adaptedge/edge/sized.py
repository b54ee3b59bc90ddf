"""Costs that grow with the item's size, on the device: one decision's cost at its size.

A decision of an item of size ``n`` pays each sensor it read at ``n`` (``protocol.costs``, the
one rule); its cost is counted into the runtime's counters directly (the per-set cache of
constant costs cannot hold it).

``predict(..., budget=b)`` (``b`` in training-scalar units): for this decision only, the
runtime runs the most accurate indexed model whose worst-case cost at the item's size fits
``b`` (the bundle's budget index), or raises ``OverBudget`` before reading anything. Keep
``max_resident_policies`` at the number of indexed points to avoid reloading sessions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from adaptedge.edge.errors import EdgeError, OperatingPointError
from adaptedge.protocol.budget_index import BudgetIndex
from adaptedge.protocol.costs import CostBreakdown, decision_cost
from adaptedge.protocol.manifest import Manifest, OperatingPoint
from adaptedge.protocol.operating_points import within_budget


def check_size(size: float) -> float:
    """The item's size as a float; ``EdgeError`` unless finite and >= 0."""
    value = float(size)
    if not math.isfinite(value) or value < 0:
        raise EdgeError(f"an item's size must be a finite number >= 0, got {size!r}")
    return value


def sized_cost(manifest: Manifest, sensor_names: tuple[str, ...], key: int, size: float,
               counters: dict[str, float], source: str) -> CostBreakdown:
    """Cost of reading set ``key >> 1`` (escalated if ``key & 1``) for an item of ``size``;
    counts the decision and its cost into ``counters``."""
    read_bits = key >> 1
    names = [n for i, n in enumerate(sensor_names) if read_bits >> i & 1]
    cost = decision_cost(manifest, names, bool(key & 1), check_size(size))
    counters["decisions"] += 1
    counters["decisions_" + source] += 1
    counters["energy_mj"] += cost.energy_mj
    counters["latency_ms"] += cost.latency_ms
    counters["money"] += cost.money
    counters["bytes"] += cost.bytes
    counters["cost"] += cost.scalar
    return cost


class OverBudget(EdgeError):
    """No indexed model's worst-case cost at this item's size fits the decision's budget:
    nothing was read or run. ``cheapest`` is the least any indexed model would cost."""

    def __init__(self, message: str, *, size: float, budget: float, cheapest: float) -> None:
        super().__init__(message)
        self.size, self.budget, self.cheapest = size, budget, cheapest


class BudgetChooser:
    """Per decision: the operating point to run under a budget (``protocol.budget_index``)."""

    def __init__(self, manifest: Manifest) -> None:
        if manifest.budget_index is None:
            raise EdgeError("this bundle has no budget index (train it with --method polydom, "
                            "greedy, greedy-acc or greedy-cost), so it cannot pick a model per "
                            "decision; use set_operating_point(budget) for a mean-cost budget")
        self.index = BudgetIndex.from_dict(manifest.budget_index,
                                           [p.name for p in manifest.operating_points])
        self.sized = manifest.size_dependent

    def point(self, size: float | None, budget: float) -> str:
        """The operating point to run; ``OverBudget`` when none fits."""
        if size is None and self.sized:
            raise EdgeError("this bundle's costs grow with the item's size: pass size= with "
                            "budget= so the budget is checked at the item's own cost")
        n = 0.0 if size is None else check_size(size)
        model = self.index.lookup(n, float(budget))
        if model is None:
            cheapest = min(self.index.worst_cost(m, n) for m in range(len(self.index.models)))
            raise OverBudget(f"no model fits a budget of {budget:g} at size {n:g} (the cheapest "
                             f"costs {cheapest:g}): nothing was read", size=n,
                             budget=float(budget), cheapest=cheapest)
        return self.index.models[model].point


def point_within_budget(points: Sequence[OperatingPoint], budget: float) -> OperatingPoint:
    """The most accurate point whose cost is <= ``budget`` (the cheaper one on ties)."""
    best = within_budget(points, budget)
    if best is None:
        cheapest = min(points, key=lambda p: p.cost)
        raise OperatingPointError(f"no operating point costs <= {budget:g}; the cheapest is "
                                  f"{cheapest.name!r} at {cheapest.cost:g}")
    return points[best]
