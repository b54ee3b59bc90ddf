"""``CSTCRegressor``: the cost-sensitive tree of regressors exactly as Xu et al. (JMLR 2014)
build it, squared loss ``(x beta_k - y)^2`` at every node and each node routing on its own
prediction (``p(upper) = sigmoid(x beta_k - theta_k)``), solved by the same Algorithm 1
(``optimise.fit_params``) as the classification trees.

The target is standardised for training (so ``lam`` means the same on ppmv as on unit data)
and the standardisation folded back: ``model_`` predicts and routes in the data's units.
Raw features only (boosted-tree features are a classification extension; refused here).
``predict`` answers with the regressor of the node each row is routed to; ``node_costs``
and ``path_groups`` give what a row pays along its path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import NotFittedError
from threadpoolctl import threadpool_limits

from adaptedge.trainer.methods.cstc.objective import FloatArray, IntArray, Problem
from adaptedge.trainer.methods.cstc.optimise import CostSensitiveModel, Schedule, fit_params
from adaptedge.trainer.methods.cstc.structure import Shape, full_tree

ROUTE_SLOPE = 10.0
"""Routing slope on the standardised prediction: ``sigmoid(10 (z - t))`` is within 1% of hard
0/1 once the prediction is 0.46 target standard deviations from the threshold."""


def train_regression(X: NDArray[np.floating], y: FloatArray, shape: Shape, *,
                     groups: Sequence[Sequence[int]], costs: Sequence[float], lam: float,
                     rho: float, schedule: Schedule, route_slope: float = ROUTE_SLOPE,
                     val: tuple[NDArray[np.floating], FloatArray]) -> CostSensitiveModel:
    """Fit a tree of regressors on standardised features and target; return it on raw inputs
    with predictions and thresholds in the target's units."""
    X64, Xv = np.asarray(X, dtype=np.float64), np.asarray(val[0], dtype=np.float64)
    mu, sigma = X64.mean(axis=0), X64.std(axis=0)
    sigma[sigma < 1e-12] = 1.0
    y_mu, y_sd = float(np.mean(y)), float(np.std(y))
    y_sd = y_sd if y_sd > 1e-12 else 1.0
    group_of = np.zeros(X64.shape[1], dtype=np.int64)
    for g, cols in enumerate(groups):
        group_of[list(cols)] = g
    cost = np.asarray(costs, dtype=np.float64)
    cost = cost / cost.mean() if cost.mean() > 0 else np.ones_like(cost)
    prob = Problem((X64 - mu) / sigma, ((np.asarray(y, dtype=np.float64) - y_mu) / y_sd)[:, None],
                   np.ones(len(y)), group_of, cost, lam, rho, "cstc", loss="squared",
                   route_slope=route_slope)
    val_y = (np.asarray(val[1], dtype=np.float64) - y_mu) / y_sd
    shape, P = fit_params(prob, shape, ((Xv - mu) / sigma, val_y), schedule)
    W = tuple(y_sd * Pw / sigma[:, None] for Pw in P.W)
    b = tuple(y_sd * (P.b[k] - (mu / sigma) @ P.W[k]) + y_mu for k in range(shape.n_nodes))
    # v z_std - theta >= 0  <=>  z - (mu + sd theta / v) >= 0: route on raw z with v = 1
    theta = y_mu + y_sd * P.theta / route_slope
    used = tuple(tuple(int(g) for g in np.unique(group_of[np.any(P.W[k] != 0, axis=1)]))
                 for k in range(shape.n_nodes))
    return CostSensitiveModel(shape, W, b, tuple(np.ones(1) for _ in P.v), theta, used)


class CSTCRegressor(RegressorMixin, BaseEstimator):  # type: ignore[misc]
    """Cost-sensitive tree of regressors (a balanced tree of ``depth`` levels, then pruned on
    validation: ``X_val``/``y_val``, default a seeded ``val_fraction`` of the training rows)."""

    def __init__(self, groups: Sequence[Sequence[int]] | None = None,
                 costs: Sequence[float] | None = None, lam: float = 0.1, depth: int = 3,
                 rho: float = 1e-3, sweeps: int = 2, max_iter: int = 40,
                 val_fraction: float = 0.2, random_state: int = 0) -> None:
        self.groups, self.costs, self.lam, self.depth = groups, costs, lam, depth
        self.rho, self.sweeps, self.max_iter = rho, sweeps, max_iter
        self.val_fraction, self.random_state = val_fraction, random_state

    def fit(self, X: Any, y: Any, X_val: Any = None, y_val: Any = None) -> CSTCRegressor:
        X = np.asarray(X, dtype=np.float32)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if not (np.all(np.isfinite(y)) and np.all(np.isfinite(X))):
            raise ValueError("CSTCRegressor needs finite features and targets; impute or drop "
                             "rows with NaN or inf first")
        if X_val is None:
            order = np.random.default_rng(self.random_state).permutation(len(y))
            cut = max(1, int(self.val_fraction * len(y)))
            X, X_val, y, y_val = X[order[cut:]], X[order[:cut]], y[order[cut:]], y[order[:cut]]
        groups = self.groups or [(c,) for c in range(X.shape[1])]
        costs = self.costs or [1.0] * len(groups)
        with threadpool_limits(limits=1):  # small matrices: more BLAS threads only contend
            self.model_ = train_regression(
                X, y, full_tree(self.depth), groups=groups, costs=costs, lam=self.lam,
                rho=self.rho, schedule=Schedule(sweeps=self.sweeps, max_iter=self.max_iter),
                val=(np.asarray(X_val, dtype=np.float32),
                     np.asarray(y_val, dtype=np.float64).reshape(-1)))
        self.groups_ = [tuple(g) for g in groups]
        self.costs_ = [float(c) for c in costs]
        return self

    def predict(self, X: Any) -> FloatArray:
        """Each row's value from the regressor of the node it is routed to."""
        model = fitted_model(self)
        X = np.asarray(X, dtype=np.float32)
        node = model.answering_node(X)
        out = np.zeros(len(X))
        for k in np.unique(node):
            rows = node == k
            out[rows] = model.logits(int(k), X[rows])[:, 0]
        return out

    def path_groups(self, k: int) -> list[int]:
        """The sensor groups a row answered at node ``k`` has read (its path's union)."""
        model = fitted_model(self)
        return sorted({g for j in model.shape.path(k) for g in model.groups[j]})

    def row_costs(self, X: Any) -> FloatArray:
        """Each row's feature cost: the costs of the groups read along its path."""
        model = fitted_model(self)
        node: IntArray = model.answering_node(np.asarray(X, dtype=np.float32))
        price = {int(k): float(sum(self.costs_[g] for g in self.path_groups(int(k))))
                 for k in np.unique(node)}
        return np.array([price[int(k)] for k in node], dtype=np.float64)


def fitted_model(estimator: Any) -> CostSensitiveModel:
    """A fitted CSTC estimator's model (``model_``); ``NotFittedError`` before ``fit``."""
    if not hasattr(estimator, "model_"):
        raise NotFittedError(f"{type(estimator).__name__} is not fitted yet; call fit first")
    model: CostSensitiveModel = estimator.model_
    return model
