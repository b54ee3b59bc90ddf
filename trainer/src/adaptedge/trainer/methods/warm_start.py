"""Initial sensor sets for ADAPT-GBRT warm starts: prefixes of a greedy sensor order.

ADAPT-GBRT buys sensors split by split with the cost-penalised impurity, so its first trees,
fitted while q is still uniform, choose the bought set by single-split gain. Sets that are
good *together* are better found by forward selection: ``greedy_order`` (the DAG's sensor
order: accuracy gain per unit cost of a shallow tree scored on held-out training rows) ranks
the sensors, and the prefixes that recover given fractions of the all-sensor proxy accuracy
(over the no-sensor accuracy) become ``initial_sensors`` (bought before the first tree, free
for g and f1; γ still prices every other sensor). Only training rows are used.

The order and its scorer are kept for the last ``KEPT_ORDERS`` inputs (keyed by their
content), so the ``--quick`` sweep that a default run adds (``methods.with_quick``) reuses
the default sweep's instead of ranking the sensors again.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from adaptedge.trainer.data.cache import hash_arrays
from adaptedge.trainer.methods.dag.problem import make_problem
from adaptedge.trainer.methods.dag.subsets import PROXY_DEPTH, ProxyScorer, greedy_order

DEFAULT_FRACTIONS = (0.85, 0.92, 0.96)
KEPT_ORDERS = 2
_ORDERS: OrderedDict[str, tuple[ProxyScorer, list[int]]] = OrderedDict()


def warm_start_sets(dataset: Any, hpc: Any, fractions: Sequence[float] = DEFAULT_FRACTIONS,
                    *, seed: int = 0, threads: int = 1) -> list[tuple[int, ...]]:
    """Distinct non-empty, proper prefixes of the greedy sensor order, one per fraction.

    For each fraction f: the shortest prefix whose proxy accuracy is at least
    ``base + f·(full − base)`` (base: no sensor; full: every sensor). Sensor indices are
    positions in ``dataset.sensors``. ``threads``: the proxy scorer's (the same sets for any).
    """
    if any(not 0.0 < f <= 1.0 for f in fractions):
        raise ValueError(f"warm-start fractions must lie in (0, 1], got {list(fractions)}")
    scorer, order = ranked_sensors(dataset, hpc, seed, threads)
    problem = scorer.problem
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


def ranked_sensors(dataset: Any, hpc: Any, seed: int, threads: int = 1
                   ) -> tuple[ProxyScorer, list[int]]:
    """The proxy scorer on the training rows and ``greedy_order`` of the sensors by it, made
    once per content of (dataset, HPC, seed) among the last ``KEPT_ORDERS``."""
    key = _content_key(dataset, hpc, seed)
    if key in _ORDERS:
        _ORDERS.move_to_end(key)
        return _ORDERS[key]
    problem = make_problem(  # training rows only: validation stays for choosing points
        sensors=dataset.sensors, weights=dataset.cost_weights, link=dataset.link,
        n_classes=len(dataset.classes), hpc_sensors=getattr(hpc, "sensors", None),
        data={"train": (dataset.X_train, dataset.y_train, hpc.oof_proba_train)})
    scorer = ProxyScorer(problem, seed=seed, max_depth=PROXY_DEPTH, threads=threads)
    _ORDERS[key] = (scorer, greedy_order(problem, scorer))
    while len(_ORDERS) > KEPT_ORDERS:
        _ORDERS.popitem(last=False)
    return _ORDERS[key]


def _content_key(dataset: Any, hpc: Any, seed: int) -> str:
    """SHA-256 of everything ``make_problem`` and the scorer read."""
    digest = hashlib.sha256(repr((dataset.sensors, dataset.cost_weights, dataset.link,
                                  len(dataset.classes), getattr(hpc, "sensors", None),
                                  seed)).encode())
    hash_arrays(digest, (dataset.X_train, dataset.y_train, hpc.oof_proba_train))
    return digest.hexdigest()
