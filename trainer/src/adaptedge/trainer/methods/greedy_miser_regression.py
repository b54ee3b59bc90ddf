"""Greedy Miser on squared loss (Xu, Weinberger & Chapelle, ICML 2012, eq. 4 with the squared
loss of its regression/ranking experiments): stage-wise regression trees on the residuals
``y - f(x)``, each split scored by its squared-error reduction minus ``gamma`` times the cost
of a sensor not yet bought (``cart.grow_tree``, the same trees as the classification form).

The target is standardised for training (``gamma`` then means the same on ppmv as on unit
data; leaves stay on ``cart.LEAF_QUANTUM``); predictions are in the data's units. As in the
paper, the model kept is the boosting iteration with the best validation error
(``at_best_iteration``); the sensors it reads are those of the trees up to it. ``to_onnx``
writes a stop node: input ``x`` (the node's columns), output ``value`` [N, 1].
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import NotFittedError

from adaptedge.protocol.onnx_contract import VALUE_OUTPUT
from adaptedge.trainer.methods.adapt_gbrt import _sensor_layout
from adaptedge.trainer.methods.cart import BinMapper, BinnedRows, Tree, TreeParams, grow_tree

FloatArray = NDArray[np.float64]


class GreedyMiserRegressor(RegressorMixin, BaseEstimator):  # type: ignore[misc]
    """Cost-aware gradient-boosted regression trees (squared loss)."""

    def __init__(self, *, gamma: float = 1e-3, n_trees: int = 300, max_depth: int = 4,
                 learning_rate: float = 0.1, min_samples_leaf: int = 20, l2: float = 1.0,
                 max_bins: int = 64, feature_sensor: Sequence[int] | None = None,
                 sensor_costs: Sequence[float] | None = None,
                 random_state: int | None = None) -> None:
        self.gamma, self.n_trees, self.max_depth = gamma, n_trees, max_depth
        self.learning_rate, self.min_samples_leaf, self.l2 = learning_rate, min_samples_leaf, l2
        self.max_bins, self.feature_sensor, self.sensor_costs = max_bins, feature_sensor, \
            sensor_costs
        self.random_state = random_state

    def fit(self, X: Any, y: Any) -> GreedyMiserRegressor:
        X32 = np.asarray(X, dtype=np.float32)
        target = np.asarray(y, dtype=np.float64).reshape(-1)
        if X32.ndim != 2 or len(target) != len(X32) or not np.all(np.isfinite(target)):
            raise ValueError("GreedyMiserRegressor needs X [N, d] and N finite targets")
        if self.gamma < 0 or self.n_trees < 1:
            raise ValueError(f"gamma must be >= 0 and n_trees >= 1, got {self.gamma}, "
                             f"{self.n_trees}")
        feature_sensor, sensor_costs = _sensor_layout(self.feature_sensor, self.sensor_costs,
                                                      X32.shape[1])
        self.y_mu_ = float(target.mean())
        self.y_sd_ = float(target.std()) or 1.0
        z = (target - self.y_mu_) / self.y_sd_
        binner = BinMapper.fit(X32, self.max_bins)
        codes = binner.transform(X32)
        rows = BinnedRows.of(codes, binner)
        params = TreeParams(max_depth=self.max_depth, min_samples_leaf=self.min_samples_leaf,
                            learning_rate=self.learning_rate, l2=self.l2, gamma=self.gamma)
        f = np.zeros(len(z))
        ones = np.ones((len(z), 1))
        bought = np.zeros(sensor_costs.size, dtype=bool)
        self.trees_: list[Tree] = []
        for _ in range(self.n_trees):
            tree, fitted = grow_tree(codes, binner, (z - f)[:, None], ones, params,
                                     sensor_costs[feature_sensor], feature_sensor, bought,
                                     None, rows)
            self.trees_.append(tree)
            f = f + fitted[:, 0]
        self.feature_sensor_, self.sensor_costs_ = feature_sensor, sensor_costs
        self.n_features_in_ = X32.shape[1]
        self.best_iteration_ = len(self.trees_)
        return self

    def _fitted(self) -> None:
        if not hasattr(self, "trees_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted yet; call fit first")

    def predict(self, X: Any) -> FloatArray:
        """Values in the data's units."""
        self._fitted()
        X32 = np.asarray(X, dtype=np.float32)
        z = np.zeros(len(X32))
        for tree in self.trees_:
            z += tree.predict(X32)[:, 0]
        return self.y_mu_ + self.y_sd_ * z

    def staged_mse(self, X: Any, y: Any) -> FloatArray:
        """MSE on ``(X, y)`` after each tree (entry t: the first t + 1 trees)."""
        self._fitted()
        X32, target = np.asarray(X, dtype=np.float32), np.asarray(y, dtype=np.float64)
        z, out = np.zeros(len(X32)), np.empty(len(self.trees_))
        for t, tree in enumerate(self.trees_):
            z += tree.predict(X32)[:, 0]
            out[t] = float(np.mean((self.y_mu_ + self.y_sd_ * z - target) ** 2))
        return out

    def at_best_iteration(self, X_val: Any, y_val: Any) -> GreedyMiserRegressor:
        """A copy keeping the trees up to the best validation MSE (the earliest of equals)."""
        keep = int(np.argmin(self.staged_mse(X_val, y_val))) + 1
        other = copy.copy(self)
        other.trees_ = list(self.trees_[:keep])
        other.best_iteration_ = keep
        return other

    @property
    def features_used_(self) -> tuple[int, ...]:
        self._fitted()
        return tuple(sorted(set().union(*(t.features_used for t in self.trees_))))

    @property
    def sensors_bought_(self) -> NDArray[np.bool_]:
        """The sensors the kept trees split on (what the device reads)."""
        used = np.zeros(self.sensor_costs_.size, dtype=bool)
        used[self.feature_sensor_[list(self.features_used_)]] = True
        return used

    def to_onnx(self, columns: Sequence[int] | None = None) -> bytes:
        """A stop node: input ``x`` = the given feature ``columns`` (default all) in that
        order, output ``value`` [N, 1] in the data's units."""
        from adaptedge.trainer.export.models import tree_ensemble_to_onnx
        from adaptedge.trainer.export.trees import TreeArrays

        self._fitted()
        cols = list(range(self.n_features_in_)) if columns is None else list(columns)
        position = {c: i for i, c in enumerate(cols)}
        missing = sorted(set(self.features_used_) - set(position))
        if missing:
            raise ValueError(f"columns {missing} are used by the trees but not given")
        trees = [TreeArrays(feature=np.array([position[int(f)] if f >= 0 else -1
                                              for f in t.feature], dtype=np.int64),
                            threshold=t.threshold.astype(np.float64),
                            left=t.left.astype(np.int64), right=t.right.astype(np.int64),
                            value=self.y_sd_ * t.value) for t in self.trees_]
        model = tree_ensemble_to_onnx(trees, len(cols), 1, base_values=[self.y_mu_],
                                      output=VALUE_OUTPUT)
        return bytes(model.SerializeToString())
