"""Greedy sensor-subset selection (the paper's Alg. 2) and a greedy sensor order.

Both score a sensor set by a fast proxy: a decision tree fitted on part of the training split
and checked on the rest (``lattice_scorer``, the DAG's: depth 12, every training row scored
out of fold over 3 folds, which ranks sensors far more stably than one 70/30 split).
``greedy_subsets`` grows ``t`` subsets to maximise
the submodular reward "an example counts as correct if some subset classifies it correctly",
one sensor at a time, taking the best reward gain per unit of sensor cost (the cost-benefit
rule for non-uniform costs). ``greedy_order`` ranks sensors for the static skyline and the
fixed-order cascade by accuracy gain per cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split
from sklearn.tree import DecisionTreeClassifier

from adaptedge.trainer.methods.dag.problem import DagProblem, IntArray, SensorSet
from adaptedge.trainer.parallel import usable_cores

BoolArray = npt.NDArray[np.bool_]
PROXY_DEPTH = 12
"""Depth of the proxy trees that rank sensors for the DAG's lattice and ADAPT-GBRT's warm
starts: deep enough to see sensors that help together (depth 8 ranks letter's worse)."""
LATTICE_PROXY_FOLDS = 3


class ProxyScorer:
    """Which training examples a decision tree on a sensor set gets right (cached).

    ``folds=None``: the tree is fitted on ``1 - holdout`` of the training rows and scores the
    rest. ``folds=k``: every training row is scored by a tree fitted on the other k - 1
    folds (stratified when every class has k rows), k times the work for k times the rows.
    ``threads``: how many sets ``prefetch`` scores at once (scikit-learn grows a tree without
    the GIL); a set's answer is the same for any number.
    """

    def __init__(self, problem: DagProblem, *, seed: int = 0, max_depth: int = 8,
                 holdout: float = 0.3, folds: int | None = None, threads: int = 1) -> None:
        train = problem.splits["train"]
        rows = np.arange(len(train.y))
        if folds is None:
            fit_rows, held_rows = train_test_split(rows, test_size=holdout, random_state=seed)
            self.splits: list[tuple[IntArray, IntArray]] = [(fit_rows, held_rows)]
        else:
            if folds < 2:
                raise ValueError(f"folds must be >= 2 (or None for one holdout), got {folds}")
            stratify = np.bincount(train.y).min() >= folds
            splitter = (StratifiedKFold if stratify else KFold)(
                folds, shuffle=True, random_state=seed)
            self.splits = list(splitter.split(train.X, train.y))
        self.problem = problem
        self.rows = np.concatenate([held for _, held in self.splits])
        """The training rows scored, in the order of ``correct``'s entries."""
        self.max_depth = max_depth
        self.seed = seed
        self.threads = max(1, min(int(threads), usable_cores()))
        self._cache: dict[SensorSet, BoolArray] = {}

    def correct(self, sensors: SensorSet) -> BoolArray:
        key = tuple(sorted(sensors))
        if key not in self._cache:
            self._cache[key] = self._score(key)
        return self._cache[key]

    def prefetch(self, sets: Sequence[SensorSet]) -> None:
        """Score every set of ``sets`` not scored yet, ``threads`` at a time."""
        keys = [k for k in dict.fromkeys(tuple(sorted(s)) for s in sets) if k not in self._cache]
        if self.threads == 1 or len(keys) < 2:
            return
        with ThreadPoolExecutor(max_workers=min(self.threads, len(keys))) as pool:
            for key, correct in zip(keys, pool.map(self._score, keys), strict=True):
                self._cache[key] = correct

    def _score(self, key: SensorSet) -> BoolArray:
        """Which held-out training rows the trees on ``key``'s columns get right."""
        train = self.problem.splits["train"]
        cols = np.asarray(self.problem.columns(key), dtype=np.int64)
        parts = []
        for fit_rows, held_rows in self.splits:
            y_fit, y_held = train.y[fit_rows], train.y[held_rows]
            if not cols.size:
                parts.append(y_held == np.bincount(y_fit).argmax())
                continue
            tree = DecisionTreeClassifier(max_depth=self.max_depth, min_samples_leaf=5,
                                          random_state=self.seed)
            tree.fit(train.X[np.ix_(fit_rows, cols)], y_fit)
            parts.append(tree.predict(train.X[np.ix_(held_rows, cols)]) == y_held)
        return np.concatenate(parts)

    def accuracy(self, sensors: SensorSet) -> float:
        return float(self.correct(sensors).mean())


def lattice_scorer(problem: DagProblem, seed: int = 0, threads: int = 1) -> ProxyScorer:
    """The proxy the DAG's lattice, the static skyline and the cascade rank sensors with."""
    return ProxyScorer(problem, seed=seed, max_depth=PROXY_DEPTH,
                       folds=LATTICE_PROXY_FOLDS, threads=threads)


def _unit_costs(problem: DagProblem) -> npt.NDArray[np.float64]:
    costs = problem.sensor_costs / max(problem.total_cost, 1e-12)
    return np.maximum(costs, 1e-6)


def greedy_subsets(problem: DagProblem, scorer: ProxyScorer, *, n_subsets: int = 6,
                   max_size: int = 3, budget: float = 1.0, min_gain: float = 1e-3
                   ) -> list[SensorSet]:
    """Up to ``n_subsets`` non-empty sensor subsets of at most ``max_size`` sensors each,
    each in the order its sensors were added.

    ``budget`` caps the summed cost of all subsets, as a fraction of the all-sensor cost.
    """
    costs = _unit_costs(problem)
    subsets: list[SensorSet] = [() for _ in range(n_subsets)]
    correct = [scorer.correct(()) for _ in range(n_subsets)]
    spent = 0.0
    for _ in range(n_subsets * max_size):
        reward = np.logical_or.reduce(correct).mean()
        best: tuple[float, int, int] | None = None
        first_empty = next((i for i, s in enumerate(subsets) if not s), None)
        for i, subset in enumerate(subsets):
            if len(subset) >= max_size or (not subset and i != first_empty):
                continue
            others = np.logical_or.reduce([c for j, c in enumerate(correct) if j != i]) \
                if n_subsets > 1 else np.zeros_like(correct[0])
            affordable = [s for s in range(problem.n_sensors)
                          if s not in subset and spent + costs[s] <= budget + 1e-9]
            scorer.prefetch([(*subset, s) for s in affordable])
            for s in affordable:
                gain = float((others | scorer.correct((*subset, s))).mean() - reward)
                if gain >= min_gain and (best is None or gain / costs[s] > best[0]):
                    best = (gain / costs[s], i, s)
        if best is None:
            break
        _, i, s = best
        subsets[i] = (*subsets[i], s)
        correct[i] = scorer.correct(subsets[i])
        spent += float(costs[s])
    chosen = [s for s in subsets if s]
    return list(dict.fromkeys(chosen))


def greedy_order(problem: DagProblem, scorer: ProxyScorer, *, max_len: int | None = None
                 ) -> list[int]:
    """Sensors in forward-selection order: each step adds the best accuracy gain per cost."""
    costs = _unit_costs(problem)
    order: list[int] = []
    remaining = list(range(problem.n_sensors))
    current = scorer.accuracy(())
    limit = problem.n_sensors if max_len is None else min(max_len, problem.n_sensors)
    while remaining and len(order) < limit:
        scorer.prefetch([(*order, s) for s in remaining])
        scored = [((scorer.accuracy((*order, s)) - current) / costs[s],
                   scorer.accuracy((*order, s)), s) for s in remaining]
        gain, acc, s = max(scored, key=lambda t: (t[0], t[1], -t[2]))
        if gain <= 0:
            # nothing helps per cost any more: take the most accurate next sensor instead
            _, acc, s = max(scored, key=lambda t: (t[1], -costs[t[2]], -t[2]))
        order.append(s)
        remaining.remove(s)
        current = acc
    return order
