"""Per-decision budgets on the exported models: each item runs the model the bundle's budget
index picks for its size and the budget (as the device does), or nothing when none fits.

``accuracy`` counts an item with no model as wrong; ``mean_cost`` charges it nothing;
``over_budget`` counts items whose charged cost exceeded the budget (must be 0);
``no_model`` counts items for which nothing fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.budget_index import BudgetIndex
from adaptedge.trainer.policy.oracle import BundleRunner


def budget_outcomes(runner: BundleRunner, X: npt.ArrayLike, y: npt.ArrayLike,
                    sizes: npt.ArrayLike | None, budget: float
                    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64],
                               npt.NDArray[np.bool_]]:
    """Per item: correct, charged training-scalar cost, and whether a model fit."""
    m = runner.manifest
    if m.budget_index is None:
        raise ValueError("the bundle has no budget index: train it with --method polydom, "
                         "greedy, greedy-acc or greedy-cost to evaluate per-decision budgets")
    if m.size_dependent and sizes is None:
        raise ValueError("the bundle's costs grow with the item's size: evaluate it on data "
                         "whose costs file names the size column")
    index = BudgetIndex.from_dict(m.budget_index, [p.name for p in m.operating_points])
    x = np.asarray(X, dtype=np.float32)
    truth = np.asarray(y, dtype=np.int64)
    n = np.zeros(len(x)) if sizes is None else np.asarray(sizes, dtype=np.float64)
    picks = [index.lookup(float(s), budget) for s in n.tolist()]
    correct = np.zeros(len(x), dtype=bool)
    cost = np.zeros(len(x))
    fit = np.array([p is not None for p in picks], dtype=bool)
    for model in sorted({p for p in picks if p is not None}):
        rows = np.flatnonzero([p == model for p in picks])
        policy = m.operating_point(index.models[model].point).policy
        result = runner.evaluate(policy, x[rows], truth[rows],
                                 None if sizes is None else n[rows])
        correct[rows] = result.labels == truth[rows]
        cost[rows] = result.cost
    return correct, cost, fit


def budget_report(runner: BundleRunner, X: npt.ArrayLike, y: npt.ArrayLike,
                  sizes: npt.ArrayLike | None, budget: float) -> dict[str, Any]:
    """``accuracy``, ``mean_cost``, ``over_budget`` and ``no_model`` under ``budget``."""
    correct, cost, fit = budget_outcomes(runner, X, y, sizes, budget)
    return {"budget": budget, "accuracy": float(correct.mean()), "mean_cost": float(cost.mean()),
            "over_budget": int((cost > budget).sum()), "no_model": int((~fit).sum()),
            "items": len(cost)}
