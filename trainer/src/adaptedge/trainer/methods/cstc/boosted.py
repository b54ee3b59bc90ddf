"""Boosted-tree features for CSTC and CSCC (Xu et al., JMLR 2014, section 5 and eq. 22).

Before the tree of classifiers is trained, gradient boosting with the squared loss fits ``T``
limited-depth regression trees (``trainer.methods.cart``, the CART trees Greedy Miser and
ADAPT-GBRT grow) to the targets: the label (two classes) or the one-hot rows (more classes:
each tree is one multi-output tree fitted to the residuals of every class at once, so a tree
gives ``K`` feature columns and is one unit of compute). ``phi(x) = [h_1(x) .. h_T(x)]`` are
then the node classifiers' inputs. Each tree is a cost group of its own (its evaluation
cost) and its columns also belong to the group of every sensor the tree splits on (``F`` of
eq. 22), so the objective's group norms charge a sensor once per path over all trees using
it, and a tree once per path over the nodes using it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from adaptedge.trainer.methods.cart import BinMapper, BinnedRows, Tree, TreeParams, grow_tree
from adaptedge.trainer.methods.cstc.objective import FloatArray, IntArray


@dataclass(frozen=True)
class BoostedFeatures:
    """``T`` fitted trees, ``K`` outputs each: ``transform`` gives ``[N, T * K]``."""

    trees: tuple[Tree, ...]
    n_outputs: int
    sensors: tuple[tuple[int, ...], ...]
    """Per tree, the sensor groups it splits on."""

    @property
    def n_trees(self) -> int:
        return len(self.trees)

    def transform(self, X: NDArray[np.floating]) -> FloatArray:
        X32 = np.asarray(X, dtype=np.float32)
        if not self.trees:
            return np.zeros((len(X32), 0))
        return np.hstack([tree.predict(X32) for tree in self.trees])

    def column_tree(self) -> IntArray:
        """The tree of each feature column."""
        return np.repeat(np.arange(self.n_trees), self.n_outputs).astype(np.int64)

    def membership(self, n_sensors: int) -> FloatArray:
        """[T * K, n_sensors + T] 0/1: column -> its trees' sensor groups and its tree group."""
        member = np.zeros((self.n_trees * self.n_outputs, n_sensors + self.n_trees))
        for col, t in enumerate(self.column_tree()):
            member[col, list(self.sensors[t])] = 1.0
            member[col, n_sensors + t] = 1.0
        return member

    def node_trees(self, W: FloatArray) -> list[int]:
        """The trees with a non-zero weight in ``W`` [T * K, m] (what a node evaluates)."""
        alive = np.any(W != 0, axis=1).reshape(self.n_trees, self.n_outputs).any(axis=1)
        return [int(t) for t in np.flatnonzero(alive)]


@dataclass(frozen=True)
class TreeSettings:
    trees: int = 60
    """Boosting iterations ``T`` (one tree each)."""
    depth: int = 3
    learning_rate: float = 0.1
    min_samples_leaf: int = 20
    max_bins: int = 64
    gammas: tuple[float, ...] = (0.0,)
    """One boosting run of ``trees`` trees per entry, each with Greedy Miser's split penalty
    ``gamma`` (0: the paper's plain boosting): a split on a sensor no earlier tree of the run
    used must gain ``gamma`` times its cost. Runs at larger gammas give trees on fewer
    sensors: cheap features for the nodes that answer easy rows."""

    def checked(self) -> TreeSettings:
        """These settings; ``ValueError`` saying which bound is broken."""
        if self.trees < 1 or self.depth < 1 or self.learning_rate <= 0 or not self.gammas \
                or min(self.gammas) < 0:
            raise ValueError(f"boosted features need trees >= 1, tree_depth >= 1, tree_rate > 0 "
                             f"and tree_gammas >= 0, got {self}")
        return self


def fit_boosted(X: NDArray[np.floating], Y: FloatArray, groups: Sequence[Sequence[int]],
                settings: TreeSettings, costs: Sequence[float] | None = None
                ) -> BoostedFeatures:
    """Squared-loss gradient boosting of ``settings.trees`` trees on targets ``Y`` [N, K];
    ``groups[g]``: the feature columns of sensor ``g``, ``costs[g]`` its cost (normalised to
    mean 1; for ``settings.gamma``). Stops early when a tree finds no
    split (every later tree would be the same single leaf)."""
    X32 = np.asarray(X, dtype=np.float32)
    n, d = X32.shape
    feature_sensor = np.zeros(d, dtype=np.intp)
    for g, cols in enumerate(groups):
        feature_sensor[list(cols)] = g
    binner = BinMapper.fit(X32, settings.max_bins)
    codes = binner.transform(X32)
    rows = BinnedRows.of(codes, binner)
    cost = np.ones(len(groups)) if costs is None else np.asarray(costs, dtype=np.float64)
    cost = cost / cost.mean() if cost.mean() > 0 else np.ones_like(cost)
    trees: list[Tree] = []
    for gamma in settings.gammas:
        params = TreeParams(max_depth=settings.depth, min_samples_leaf=settings.min_samples_leaf,
                            learning_rate=settings.learning_rate, l2=1.0, gamma=gamma)
        F = np.tile(Y.mean(axis=0), (n, 1))
        bought = np.zeros(len(groups), dtype=bool)
        for _ in range(settings.trees):
            tree, fitted = grow_tree(codes, binner, Y - F, np.ones_like(Y), params,
                                     cost[feature_sensor], feature_sensor, bought, rows=rows)
            if not tree.features_used:
                break
            trees.append(tree)
            F += fitted
    sensors = tuple(tuple(sorted({int(feature_sensor[j]) for j in t.features_used}))
                    for t in trees)
    return BoostedFeatures(tuple(trees), Y.shape[1], sensors)
