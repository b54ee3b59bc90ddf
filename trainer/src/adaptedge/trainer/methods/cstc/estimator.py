"""Scikit-learn-style estimators: ``CSTCClassifier`` (a tree) and ``CSCCClassifier`` (a cascade,
``variant="cronus"`` for Cronus's cost term).

``fit(X, y, hpc_proba=None, X_val=None, y_val=None)``: ``groups`` lists the feature columns
of each sensor (default: one sensor per column) and ``costs`` their costs (default 1). The
validation rows (default: a seeded ``val_fraction`` of the training rows) set the initial
thresholds and prune the structure. ``features="boosted"``: the nodes weigh the outputs of
boosted regression trees (``boosted``: one run of ``trees`` trees of depth ``tree_depth`` at
step ``tree_rate`` per Greedy Miser penalty in ``tree_gammas``), each tree evaluation costing
``tree_cost`` times the mean sensor cost. ``loss``: ``"squared"`` (two classes: the paper's
squared loss on -1/+1 labels) or ``"logistic"``; ``init``: ``"lookahead"`` or ``"paper"``
(``train_model``). ``predict_proba`` answers with the classifier of the node
each row is routed to; ``model_`` is the trained ``CostSensitiveModel`` on raw inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize_scalar
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.class_weight import compute_sample_weight
from threadpoolctl import threadpool_limits

from adaptedge.trainer.methods.cstc.boosted import BoostedFeatures, TreeSettings, fit_boosted
from adaptedge.trainer.methods.cstc.objective import (
    FloatArray,
    IntArray,
    Loss,
    Problem,
    Variant,
)
from adaptedge.trainer.methods.cstc.optimise import CostSensitiveModel, Schedule, fit_params
from adaptedge.trainer.methods.cstc.regressor import ROUTE_SLOPE, fitted_model
from adaptedge.trainer.methods.cstc.structure import Shape, cascade, full_tree

KAPPA_RANGE = (0.05, 30.0)
"""Bounds of a node's logit scale (a leaf that is right on every training row it answers
would otherwise take an unbounded scale)."""


def _targets(y: IntArray, n_classes: int) -> FloatArray:
    if n_classes == 2:
        return y[:, None].astype(np.float64)
    return np.eye(n_classes)[y]


def loss_for(n_classes: int, loss: str) -> Loss:
    """The node loss: ``"squared"`` (the paper's, on -1/+1 labels) is for two classes only;
    more classes keep the softmax loss."""
    if loss not in ("squared", "logistic"):
        raise ValueError(f"loss must be squared or logistic, got {loss!r}")
    return "squared-sign" if loss == "squared" and n_classes == 2 else "logistic"


def train_model(X: NDArray[np.floating], y: IntArray, n_classes: int, shape: Shape, *,
                groups: Sequence[Sequence[int]], costs: Sequence[float], lam: float,
                rho: float, variant: Variant, schedule: Schedule,
                val: tuple[NDArray[np.floating], IntArray], weight: FloatArray | None = None,
                features: BoostedFeatures | None = None, tree_cost: float = 0.0,
                loss: str = "squared", init: str = "lookahead") -> CostSensitiveModel:
    """Fit on standardised features; return the model on raw inputs. ``features``: boosted
    trees (``boosted.fit_boosted``) whose outputs the nodes weigh instead of the raw columns,
    each tree evaluation costing ``tree_cost`` times the mean sensor cost. ``loss``:
    ``"squared"`` (two classes: the paper's squared loss on -1/+1 labels, nodes routing on
    their prediction with ``ROUTE_SLOPE``, each node's prediction then scaled to a logit by
    ``calibrate``) or ``"logistic"``. ``init``: ``"lookahead"`` (the squared loss only:
    routing nodes chosen by ``lookahead.choose``) or ``"paper"`` (every node its leaf fit)."""
    kind = loss_for(n_classes, loss)
    if init not in ("lookahead", "paper"):
        raise ValueError(f"init must be lookahead or paper, got {init!r}")
    X64 = np.asarray(X, dtype=np.float64) if features is None else features.transform(X)
    Xv = np.asarray(val[0], dtype=np.float64) if features is None else features.transform(val[0])
    mu, sigma = X64.mean(axis=0), X64.std(axis=0)
    sigma[sigma < 1e-12] = 1.0
    group_of = np.zeros(X64.shape[1], dtype=np.int64)
    cost = np.asarray(costs, dtype=np.float64)
    cost = cost / cost.mean() if cost.mean() > 0 else np.ones_like(cost)
    member = None
    if features is None:
        for g, cols in enumerate(groups):
            group_of[list(cols)] = g
    else:
        member = features.membership(len(groups))
        group_of = len(groups) + features.column_tree()
        cost = np.concatenate([cost, np.full(features.n_trees, float(tree_cost))])
    Y = _targets(y, n_classes)
    prob = Problem((X64 - mu) / sigma, 2 * Y - 1 if kind == "squared-sign" else Y,
                   np.ones(len(y)) if weight is None else weight, group_of, cost, lam, rho,
                   variant, member, 0 if features is None else features.n_trees, loss=kind,
                   route_slope=ROUTE_SLOPE if kind == "squared-sign" else 1.0)
    shape, P = fit_params(prob, shape, ((Xv - mu) / sigma, np.asarray(val[1])), schedule,
                          lookahead=init == "lookahead" and kind == "squared-sign")
    W = tuple(Pw / sigma[:, None] for Pw in P.W)
    b = tuple(P.b[k] - (mu / sigma) @ P.W[k] for k in range(shape.n_nodes))
    if features is None:
        used = tuple(tuple(int(g) for g in np.unique(group_of[np.any(P.W[k] != 0, axis=1)]))
                     for k in range(shape.n_nodes))
    else:
        used = tuple(tuple(sorted({g for t in features.node_trees(P.W[k])
                                   for g in features.sensors[t]}))
                     for k in range(shape.n_nodes))
    model = CostSensitiveModel(shape, W, b, tuple(P.v), P.theta.copy(), used, features)
    return calibrate(model, X, y) if kind == "squared-sign" else model


def calibrate(model: CostSensitiveModel, X: NDArray[np.floating], y: IntArray
              ) -> CostSensitiveModel:
    """A squared-loss model (predictions ``f`` near -1/+1, routing ``slope f - theta >= 0``)
    as logits: node ``k``'s prediction scaled by ``kappa_k > 0``, the logistic fit of the
    training labels answered at ``k`` (a routing node that does not answer: the routing
    slope), and its routing rewritten ``kappa f - kappa theta / slope >= 0`` (v = 1). The
    signs, hence the classes and the routes, do not change."""
    node = model.answering_node(np.asarray(X, dtype=np.float32))
    W, b, theta = list(model.W), list(model.b), model.theta.copy()
    for k in model.shape.alive():
        slope = float(model.v[k][0])
        rows = node == k
        f = model.logits(k, X[rows])[:, 0] if rows.any() else np.zeros(0)
        margin = (2.0 * y[rows] - 1) * f
        kappa = slope
        if rows.any():
            kappa = float(minimize_scalar(
                lambda c, m=margin: float(np.logaddexp(0.0, -c * m).mean()),
                bounds=KAPPA_RANGE, method="bounded").x)
        W[k], b[k] = kappa * W[k], kappa * b[k]
        theta[k] = kappa * theta[k] / slope
    ones = tuple(np.ones(1) for _ in model.v)
    return replace(model, W=tuple(W), b=tuple(b), v=ones, theta=theta)


def proba_from_logits(z: FloatArray) -> FloatArray:
    if z.shape[1] == 1:
        p1 = expit(z[:, 0])  # a routing node's scaled prediction may be far beyond +-700
        return np.column_stack([1 - p1, p1])
    e = np.exp(z - z.max(axis=1, keepdims=True))
    out: FloatArray = e / e.sum(axis=1, keepdims=True)
    return out


class _CostSensitive(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    groups: Sequence[Sequence[int]] | None
    costs: Sequence[float] | None
    lam: float
    rho: float
    sweeps: int
    max_iter: int
    balanced: bool
    val_fraction: float
    random_state: int
    features: str
    trees: int
    tree_depth: int
    tree_rate: float
    tree_gammas: Sequence[float]
    tree_cost: float
    loss: str
    init: str

    def _trees(self) -> TreeSettings | None:
        if self.features not in ("raw", "boosted"):
            raise ValueError(f"features must be raw or boosted, got {self.features!r}")
        if self.features == "raw":
            return None
        if self.tree_cost < 0:
            raise ValueError(f"tree_cost must be >= 0, got {self.tree_cost}")
        return TreeSettings(trees=self.trees, depth=self.tree_depth, learning_rate=self.tree_rate,
                            gammas=tuple(self.tree_gammas)).checked()

    def _shape(self) -> Shape:
        raise NotImplementedError

    def _variant(self) -> Variant:
        raise NotImplementedError

    def fit(self, X: Any, y: Any, hpc_proba: Any = None, X_val: Any = None,
            y_val: Any = None) -> _CostSensitive:
        X = np.asarray(X, dtype=np.float32)
        y_raw = np.asarray(y)
        self.classes_, y_idx = np.unique(y_raw, return_inverse=True)
        if X_val is None:
            order = np.random.default_rng(self.random_state).permutation(len(y_idx))
            cut = max(1, int(self.val_fraction * len(y_idx)))
            val_rows, train_rows = order[:cut], order[cut:]
            X, X_val, y_idx, y_val_idx = X[train_rows], X[val_rows], y_idx[train_rows], \
                y_idx[val_rows]
        else:
            y_val_idx = np.searchsorted(self.classes_, np.asarray(y_val))
        groups = self.groups or [(c,) for c in range(X.shape[1])]
        costs = self.costs or [1.0] * len(groups)
        weight = compute_sample_weight("balanced", y_idx) if self.balanced else None
        settings = self._trees()
        features = None if settings is None else fit_boosted(
            X, _targets(y_idx, len(self.classes_)), groups, settings, costs)
        with threadpool_limits(limits=1):  # small matrices: more BLAS threads only contend
            self.model_ = self._train(X, y_idx, groups, costs, (X_val, y_val_idx), weight,
                                      features)
        self.groups_ = [tuple(g) for g in groups]
        return self

    def _train(self, X: NDArray[np.float32], y_idx: IntArray, groups: Sequence[Sequence[int]],
               costs: Sequence[float], val: tuple[Any, IntArray], weight: FloatArray | None,
               features: BoostedFeatures | None) -> CostSensitiveModel:
        X_val, y_val_idx = val
        return train_model(
            X, y_idx.astype(np.int64), len(self.classes_), self._shape(), groups=groups,
            costs=costs, lam=self.lam, rho=self.rho, variant=self._variant(),
            schedule=Schedule(sweeps=self.sweeps, max_iter=self.max_iter),
            val=(np.asarray(X_val, dtype=np.float32), y_val_idx.astype(np.int64)),
            weight=weight, features=features, tree_cost=self.tree_cost, loss=self.loss,
            init=self.init)

    def predict_proba(self, X: Any) -> FloatArray:
        model = fitted_model(self)
        X = np.asarray(X, dtype=np.float32)
        node = model.answering_node(X)
        out = np.zeros((len(X), len(self.classes_)))
        for k in np.unique(node):
            rows = node == k
            out[rows] = proba_from_logits(model.logits(int(k), X[rows]))
        return out

    def predict(self, X: Any) -> NDArray[Any]:
        return self.classes_[self.predict_proba(X).argmax(axis=1)]  # type: ignore[no-any-return]

    def node_columns(self) -> list[int]:
        """Every column some node reads."""
        model = fitted_model(self)
        used = {g for k in model.shape.alive() for g in model.groups[k]}
        return sorted(c for g in used for c in self.groups_[g])


class CSTCClassifier(_CostSensitive):
    """Cost-sensitive tree of classifiers (a balanced tree of ``depth`` levels, then pruned)."""

    def __init__(self, groups: Sequence[Sequence[int]] | None = None,
                 costs: Sequence[float] | None = None, lam: float = 0.1, depth: int = 3,
                 rho: float = 1e-3, sweeps: int = 2, max_iter: int = 40,
                 balanced: bool = False, val_fraction: float = 0.2,
                 random_state: int = 0, features: str = "raw", trees: int = 100,
                 tree_depth: int = 5, tree_rate: float = 0.3,
                 tree_gammas: Sequence[float] = (3e-3, 1e-3, 2e-4),
                 tree_cost: float = 0.01, loss: str = "squared", init: str = "lookahead"
                 ) -> None:
        self.loss, self.init = loss, init
        self.features, self.trees, self.tree_depth = features, trees, tree_depth
        self.tree_rate, self.tree_gammas, self.tree_cost = tree_rate, tree_gammas, tree_cost
        self.groups, self.costs, self.lam, self.depth = groups, costs, lam, depth
        self.rho, self.sweeps, self.max_iter = rho, sweeps, max_iter
        self.balanced, self.val_fraction, self.random_state = balanced, val_fraction, random_state

    def _shape(self) -> Shape:
        return full_tree(self.depth)

    def _variant(self) -> Variant:
        return "cstc"


class CSCCClassifier(_CostSensitive):
    """Cost-sensitive cascade of ``stages`` classifiers; ``variant`` "cscc" or "cronus"."""

    def __init__(self, groups: Sequence[Sequence[int]] | None = None,
                 costs: Sequence[float] | None = None, lam: float = 0.1, stages: int = 4,
                 variant: str = "cscc", rho: float = 1e-3, sweeps: int = 2,
                 max_iter: int = 40, balanced: bool = False, val_fraction: float = 0.2,
                 random_state: int = 0, features: str = "raw", trees: int = 100,
                 tree_depth: int = 5, tree_rate: float = 0.3,
                 tree_gammas: Sequence[float] = (3e-3, 1e-3, 2e-4),
                 tree_cost: float = 0.01, loss: str = "squared", init: str = "lookahead"
                 ) -> None:
        self.loss, self.init = loss, init
        self.features, self.trees, self.tree_depth = features, trees, tree_depth
        self.tree_rate, self.tree_gammas, self.tree_cost = tree_rate, tree_gammas, tree_cost
        self.groups, self.costs, self.lam, self.stages = groups, costs, lam, stages
        self.variant, self.rho, self.sweeps, self.max_iter = variant, rho, sweeps, max_iter
        self.balanced, self.val_fraction, self.random_state = balanced, val_fraction, random_state

    def _shape(self) -> Shape:
        return cascade(self.stages)

    def _variant(self) -> Variant:
        if self.variant not in ("cscc", "cronus"):
            raise ValueError(f"variant must be cscc or cronus, got {self.variant!r}")
        return "cronus" if self.variant == "cronus" else "cscc"
