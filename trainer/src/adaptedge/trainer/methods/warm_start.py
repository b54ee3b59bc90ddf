"""Initial sensor sets for ADAPT-GBRT warm starts: prefixes of a greedy sensor order.

ADAPT-GBRT buys sensors split by split with the cost-penalised impurity, so its first trees,
fitted while q is still uniform, choose the bought set by single-split gain. Sets that are
good *together* are better found by forward selection: ``greedy_order`` (the DAG's sensor
order: accuracy gain per unit cost of a shallow tree scored on held-out training rows) ranks
the sensors, and the prefixes that recover given fractions of the all-sensor proxy accuracy
(over the no-sensor accuracy) become ``initial_sensors`` (bought before the first tree, free
for g and f1; γ still prices every other sensor). Only training rows are used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adaptedge.trainer.methods.dag.problem import make_problem
from adaptedge.trainer.methods.dag.subsets import PROXY_DEPTH, ProxyScorer, greedy_order

DEFAULT_FRACTIONS = (0.85, 0.92, 0.96)


def warm_start_sets(dataset: Any, hpc: Any, fractions: Sequence[float] = DEFAULT_FRACTIONS,
                    *, seed: int = 0) -> list[tuple[int, ...]]:
    """Distinct non-empty, proper prefixes of the greedy sensor order, one per fraction.

    For each fraction f: the shortest prefix whose proxy accuracy is at least
    ``base + f·(full − base)`` (base: no sensor; full: every sensor). Sensor indices are
    positions in ``dataset.sensors``.
    """
    if any(not 0.0 < f <= 1.0 for f in fractions):
        raise ValueError(f"warm-start fractions must lie in (0, 1], got {list(fractions)}")
    hpc_sensors = getattr(hpc, "sensors", None)
    problem = make_problem(  # training rows only: validation stays for choosing points
        sensors=dataset.sensors, weights=dataset.cost_weights, link=dataset.link,
        n_classes=len(dataset.classes), hpc_sensors=hpc_sensors,
        data={"train": (dataset.X_train, dataset.y_train, hpc.oof_proba_train)})
    scorer = ProxyScorer(problem, seed=seed, max_depth=PROXY_DEPTH)
    order = greedy_order(problem, scorer)
    base = scorer.accuracy(())
    full = scorer.accuracy(tuple(range(problem.n_sensors)))
    prefixes: list[tuple[int, ...]] = []
    for f in sorted(fractions):
        goal = base + f * (full - base)
        k = next((k for k in range(1, len(order) + 1)
                  if scorer.accuracy(tuple(order[:k])) >= goal), len(order))
        prefix = tuple(int(s) for s in order[:k])
        if k < problem.n_sensors and prefix not in prefixes:
            prefixes.append(prefix)
    return prefixes
