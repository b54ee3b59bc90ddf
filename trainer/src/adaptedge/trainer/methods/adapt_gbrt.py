"""ADAPT-GBRT (Nan & Saligrama, NIPS 2017, Algorithm 2): boosted-tree gate g and LPC f1.

Alternating minimisation of

    mean_i [(1−q_i)(CE(f1(x_i), y_i) + softplus(g(x_i))) + q_i softplus(−g(x_i))] + γ·Ω(f1, g)
    subject to mean_i q_i <= P_full,

where q_i = q(escalate|x_i). The q-step is the closed form ``σ(A_i − B_i − β)`` with β found by
bisection (``trainer.methods.gating.q_step``); the (g, f1)-step adds ``n_trees`` limited-depth trees to
each, fitted to the negative gradients with the cost-penalised impurity of ``trainer.methods.cart``.
Our own histogram CART is used (not LightGBM): one ``bought`` mask over sensors is shared by
the trees of g and f1, so a sensor bought by either is free for both, and buying any feature
of a sensor buys the whole sensor. f1 is a sigmoid (binary) or softmax (multi-class) model.
With ``p_full = 0`` no example is escalated and the gate is not trained: Greedy Miser.

Three generalisations beyond the paper, all off by default in the estimator:
``refine_rounds`` adds alternation rounds whose trees may only split on sensors already bought
(free features; the paper's stage-wise trees after γ has done its selection), and
``margin_weight`` w lets the gate subtract w·(LPC logit margin) — computing f1 costs no
sensor, so a confident LPC answer can lower the escalation score (w = 0 is the paper's gate);
and ``initial_sensors`` are bought before the first tree (free for g and f1, γ still prices
the rest): the sweep warm-starts from prefixes of a greedy sensor order
(``trainer.methods.warm_start``), because γ's split-by-split buying, done while q is still uniform,
picks sensors that are strong alone rather than together (letter-binary: see the README).

The registered sweep (``adapt-gbrt``) is ``trainer.methods.adapt_gbrt_method``.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import onnx
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from adaptedge.protocol.action_head import ActionHead
from adaptedge.trainer.export.models import node_model
from adaptedge.trainer.export.trees import tree_core
from adaptedge.trainer.methods.cart import (
    BinMapper,
    BinnedRows,
    Tree,
    TreeParams,
    grow_tree,
    predict_trees,
    quantize,
)
from adaptedge.trainer.methods.gating import (
    cross_entropy,
    hpc_loss,
    lpc_gradients,
    n_logits,
    proba,
    q_step,
    sigmoid,
    softplus,
)
from adaptedge.trainer.methods.hpc_oof import HPC_CONSTRAINT, hpc_proba_for
from adaptedge.trainer.methods.labels import class_indices, predicted_labels

FloatArray = NDArray[np.float64]
RoundStop = Callable[[FloatArray, Sequence[Tree]], bool]
"""Called after each boosting round with the LPC's base logits and trees so far; True ends the
boosting."""


def _sensor_layout(
    feature_sensor: Sequence[int] | NDArray[np.integer] | None,
    sensor_costs: Sequence[float] | NDArray[np.floating] | None,
    n_features: int,
) -> tuple[NDArray[np.intp], FloatArray]:
    """Validated feature->sensor map and per-sensor costs (default: one unit sensor per feature)."""
    fs = np.arange(n_features) if feature_sensor is None else np.asarray(feature_sensor)
    if fs.shape != (n_features,) or fs.min(initial=0) < 0:
        raise ValueError(
            f"feature_sensor must give a sensor index >= 0 for each of the {n_features} "
            f"features, got shape {fs.shape}"
        )
    n_sensors = int(fs.max(initial=-1)) + 1
    costs = np.ones(n_sensors) if sensor_costs is None else np.asarray(sensor_costs, float)
    if costs.ndim != 1 or costs.size < n_sensors or not np.all(np.isfinite(costs)) or np.any(costs < 0):
        raise ValueError(
            f"sensor_costs must be >= {n_sensors} finite non-negative numbers (one per sensor "
            f"index in feature_sensor), got {costs!r}"
        )
    return fs.astype(np.intp), costs


class AdaptGbrtClassifier(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """Gate + LPC as boosted trees that adaptively approximate an HPC.

    ``fit(X, y, hpc_proba=P)`` takes class indices ``y`` in ``range(P.shape[1])`` and the HPC's
    (out-of-fold) class probabilities ``P`` on the same rows; ``fit(X, y)`` computes them from
    the ``hpc`` parameter (``trainer.methods.hpc_oof``).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "p_full": [Interval(Real, 0, 1, closed="both")],
        "gamma": [Interval(Real, 0, None, closed="both")],
        "n_rounds": [Interval(Integral, 1, None, closed="left")],
        "n_trees": [Interval(Integral, 1, None, closed="left")],
        "refine_rounds": [Interval(Integral, 0, None, closed="left")],
        "max_depth": [Interval(Integral, 1, 12, closed="both")],
        "learning_rate": [Interval(Real, 0, 1, closed="right")],
        "min_samples_leaf": [Interval(Integral, 1, None, closed="left")],
        "l2": [Interval(Real, 0, None, closed="left")],
        "max_bins": [Interval(Integral, 2, 255, closed="both")],
        "gate_threshold": [Interval(Real, None, None, closed="neither")],
        "margin_weight": [Interval(Real, 0, None, closed="left")],
        "feature_sensor": ["array-like", None],
        "sensor_costs": ["array-like", None],
        "initial_sensors": ["array-like", None],
        "random_state": ["random_state"],
        "hpc": HPC_CONSTRAINT,
    }

    def __init__(
        self,
        *,
        p_full: float = 0.2,
        gamma: float = 1e-3,
        n_rounds: int = 6,
        n_trees: int = 10,
        refine_rounds: int = 0,
        max_depth: int = 3,
        learning_rate: float = 0.2,
        min_samples_leaf: int = 20,
        l2: float = 1.0,
        max_bins: int = 64,
        gate_threshold: float = 0.0,
        margin_weight: float = 0.0,
        feature_sensor: Sequence[int] | None = None,
        sensor_costs: Sequence[float] | None = None,
        initial_sensors: Sequence[int] | None = None,
        random_state: int | None = None,
        hpc: Any = "auto",
    ) -> None:
        self.p_full = p_full
        self.gamma = gamma
        self.n_rounds = n_rounds
        self.n_trees = n_trees
        self.refine_rounds = refine_rounds
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.min_samples_leaf = min_samples_leaf
        self.l2 = l2
        self.max_bins = max_bins
        self.gate_threshold = gate_threshold
        self.margin_weight = margin_weight
        self.feature_sensor = feature_sensor
        self.sensor_costs = sensor_costs
        self.initial_sensors = initial_sensors
        self.random_state = random_state
        self.hpc = hpc

    # -- fitting ----------------------------------------------------------------------------
    def fit(self, X: NDArray[np.floating], y: NDArray[np.integer],
            hpc_proba: NDArray[np.floating] | None = None, *,
            stop: RoundStop | None = None) -> AdaptGbrtClassifier:
        """``stop``: called after each round with the LPC's base logits and trees so far; True
        ends the boosting there (Greedy Miser's validation patience)."""
        self._validate_params()  # hpc_proba: see trainer.methods.hpc_oof.hpc_proba_for
        classes, yi = class_indices(y, hpc_proba)
        X32, yi, P = _check_inputs(X, yi, hpc_proba_for(self, X, yi, hpc_proba))
        started = time.perf_counter()
        n, d = X32.shape
        n_classes = P.shape[1]
        feature_sensor, sensor_costs = _sensor_layout(self.feature_sensor, self.sensor_costs, d)
        feature_cost = sensor_costs[feature_sensor]
        binner = BinMapper.fit(X32, self.max_bins)
        codes = binner.transform(X32)
        rows = BinnedRows.of(codes, binner)  # shared by every tree of this fit
        params = TreeParams(
            max_depth=self.max_depth, min_samples_leaf=self.min_samples_leaf,
            learning_rate=self.learning_rate, l2=self.l2, gamma=self.gamma,
        )
        prior = np.bincount(yi, minlength=n_classes) / n + 1e-3
        f1_base = quantize(
            np.log(prior[1:] / prior[:1]) if n_classes == 2 else np.log(prior) - np.log(prior).mean()
        )
        p_full = float(self.p_full)
        g_base = quantize(np.log(max(p_full, 1e-3) / (1 - min(p_full, 0.999))))
        logits = np.tile(f1_base, (n, 1))
        gate = np.full(n, float(g_base))
        bought = np.zeros(sensor_costs.size, dtype=bool)
        bought[_initial_sensors(self.initial_sensors, sensor_costs.size)] = True
        f1_trees: list[Tree] = []
        g_trees: list[Tree] = []
        loss_hpc = hpc_loss(P, yi)
        history: list[float] = []
        q = np.zeros(n)
        allowed: NDArray[np.bool_] | None = None
        for round_ in range(self.n_rounds + self.refine_rounds):
            if round_ == self.n_rounds:  # refinement: only features of sensors already bought
                allowed = bought[feature_sensor].copy()
                if not allowed.any():
                    break
            if p_full > 0:  # else nothing is escalated (Greedy Miser): q stays 0
                q = _q_of(logits, yi, n_classes, gate, loss_hpc, p_full)
            for _t in range(self.n_trees):
                r, h = lpc_gradients(logits, yi, n_classes, 1.0 - q)
                tree, fitted = grow_tree(  # fitted: tree.predict(X32), without the walk
                    codes, binner, r, h, params, feature_cost, feature_sensor, bought, allowed,
                    rows)
                f1_trees.append(tree)
                logits = logits + fitted
                if p_full > 0:
                    s = sigmoid(gate)
                    tree, fitted = grow_tree(
                        codes, binner, (q - s)[:, None], (s * (1 - s))[:, None] + 1e-12,
                        params, feature_cost, feature_sensor, bought, allowed, rows,
                    )
                    g_trees.append(tree)
                    gate = gate + fitted[:, 0]
            history.append(float(np.mean(
                (1 - q) * (cross_entropy(logits, yi, n_classes) + softplus(gate))
                + q * softplus(-gate)
            )))
            if stop is not None and stop(f1_base, f1_trees):
                break
        self.n_classes_, self.classes_, self.n_features_in_ = n_classes, classes, d
        self.f1_base_ = f1_base
        self.g_base_ = float(g_base) if p_full > 0 else -1.0
        self._keep_trees(f1_trees, g_trees, feature_sensor, sensor_costs)
        self.q_train_ = q
        self.loss_history_ = history
        self.fit_seconds_ = time.perf_counter() - started
        return self

    def _keep_trees(self, f1_trees: list[Tree], g_trees: list[Tree],
                    feature_sensor: NDArray[np.intp], sensor_costs: FloatArray) -> None:
        """The fitted trees, and what the device reads: sensors some tree splits on (not an
        unused initial one)."""
        self._core_cache_: dict[bool, onnx.NodeProto] = {}  # see to_onnx
        self.f1_trees_ = f1_trees
        self.g_trees_ = g_trees
        self.feature_sensor_ = feature_sensor
        self.sensor_costs_ = sensor_costs
        self.features_used_ = tuple(sorted(
            set().union(*(t.features_used for t in f1_trees + g_trees))
        ))
        used = np.zeros(sensor_costs.size, dtype=bool)
        used[feature_sensor[list(self.features_used_)]] = True
        self.sensors_bought_ = used

    # -- prediction ---------------------------------------------------------------------------
    def decision_logits(self, X: NDArray[np.floating]) -> FloatArray:
        check_is_fitted(self)
        k = n_logits(self.n_classes_)
        return predict_trees(self.f1_trees_, X, k) + self.f1_base_

    def gate_score(self, X: NDArray[np.floating]) -> FloatArray:
        """``g(x) − gate_threshold − margin_weight · margin(x)``: positive means escalate.

        ``margin`` is the LPC's logit margin (``|z|`` binary, top-1 minus top-2 otherwise):
        with ``margin_weight > 0`` a confident LPC answer lowers the gate score (0 = the
        paper's gate). All terms are on the exact float32 grid, so ONNX routing is identical.
        """
        margin = self.lpc_margin(X) if self.margin_weight else None
        return gate_score_from(self.gate_raw(X), margin, self.gate_threshold,
                               self.margin_weight)

    def gate_raw(self, X: NDArray[np.floating]) -> FloatArray:
        """``g(x)`` before the threshold and the margin term (shared by every variant)."""
        check_is_fitted(self)
        raw: FloatArray = predict_trees(self.g_trees_, X, 1)[:, 0] + self.g_base_
        return raw

    def lpc_margin(self, X: NDArray[np.floating],
                   logits: FloatArray | None = None) -> FloatArray:
        """The LPC's logit margin; ``logits``: ``decision_logits(X)`` when already computed."""
        z = self.decision_logits(X) if logits is None else logits
        if z.shape[1] == 1:
            out: FloatArray = np.abs(z[:, 0])
            return out
        top = np.sort(z, axis=1)
        out = top[:, -1] - top[:, -2]
        return out

    def escalate(self, X: NDArray[np.floating]) -> NDArray[np.bool_]:
        out: NDArray[np.bool_] = self.gate_score(X) > 0
        return out

    def predict_proba(self, X: NDArray[np.floating]) -> FloatArray:
        """The LPC's class probabilities (what the device answers when it stops)."""
        return proba(self.decision_logits(X), self.n_classes_)

    def predict(self, X: NDArray[np.floating]) -> NDArray[Any]:
        return predicted_labels(self.classes_, self.predict_proba(X))

    # -- export -------------------------------------------------------------------------------
    def node_columns(self) -> tuple[int, ...]:
        """The node's input columns: every feature of every bought sensor, ascending."""
        check_is_fitted(self)
        return tuple(int(j) for j in np.flatnonzero(self.sensors_bought_[self.feature_sensor_]))

    def to_onnx(self, *, gated: bool = True, basis: bool = False) -> bytes:
        """The fused node model: input ``x`` = ``node_columns()``; ``probabilities`` and, when
        ``gated``, ``action_scores`` = (stop, escalate) scores ``[-g', g']`` with
        ``g' = g − gate_threshold − w · margin``; with ``basis`` instead ``action_basis`` =
        ``[g, margin]``, the same for every threshold and w (``to_onnx_shared``)."""
        check_is_fitted(self)
        columns = self.node_columns()
        position = {c: i for i, c in enumerate(columns)}
        k = n_logits(self.n_classes_)
        base = list(self.f1_base_)
        if gated:
            base.append(self.g_base_ - (0.0 if basis else float(quantize(self.gate_threshold))))
        # the tree ensemble is the same for every threshold variant (shallow copies share
        # this cache): build it once, then only its base values change
        cache = self._core_cache_
        if gated not in cache:
            trees: list[tuple[Tree, int]] = [(t, 0) for t in self.f1_trees_]
            if gated:
                trees += [(t, k) for t in self.g_trees_]
            cache[gated] = tree_core(trees, np.array(base), position)[0]
        core = onnx.NodeProto()
        core.CopyFrom(cache[gated])
        for attr in core.attribute:
            if attr.name == "base_values":
                del attr.floats[:]
                attr.floats.extend(float(v) for v in base)
        return node_model(
            [core], [], len(columns), self.n_classes_,
            ("gate_basis" if basis else "gate") if gated else "stop",
            margin_weight=_margin_weight(self.margin_weight) if gated else 0.0,
        )

    def to_onnx_shared(self) -> tuple[bytes, ActionHead]:
        """``to_onnx(basis=True)`` (one model for every threshold and margin weight of this
        fit) and the action head that gives this variant's (stop, escalate) scores from its
        ``[g, margin]``: ``W = [[-1, 1], [w, -w]]``, ``bias = [t, -t]``. On the leaf grid
        every term is exact in float32, so the scores equal ``to_onnx()``'s bit for bit."""
        t = float(quantize(self.gate_threshold))
        w = _margin_weight(self.margin_weight)
        head = ActionHead(weights=((-1.0, 1.0), (w, -w)), bias=(t, -t))
        return self.to_onnx(basis=True), head

    def with_threshold(self, gate_threshold: float,
                       margin_weight: float | None = None) -> AdaptGbrtClassifier:
        """A shallow copy sharing the trees, with another gate threshold (and margin weight)."""
        other = copy.copy(self)
        other.gate_threshold = float(quantize(gate_threshold))
        if margin_weight is not None:
            other.margin_weight = margin_weight
        return other


def _q_of(logits: FloatArray, yi: NDArray[np.int64], n_classes: int, gate: FloatArray,
          loss_hpc: FloatArray, p_full: float) -> FloatArray:
    """The q-step: each row's oracle probability of escalating (``gating.q_step``)."""
    excess = cross_entropy(logits, yi, n_classes) + softplus(gate) - loss_hpc - softplus(-gate)
    return q_step(excess, p_full)[0]


def gate_score_from(raw: FloatArray, margin: FloatArray | None, gate_threshold: float,
                    margin_weight: float) -> FloatArray:
    """The gate score from ``gate_raw`` and ``lpc_margin`` (needed only when
    ``margin_weight`` is non-zero): what ``gate_score`` computes, bit for bit."""
    out: FloatArray = raw - float(quantize(gate_threshold))
    if margin_weight:
        if margin is None:
            raise ValueError("a non-zero margin_weight needs the LPC margin")
        out = out - _margin_weight(margin_weight) * margin
    return out


def _initial_sensors(initial: Sequence[int] | None, n_sensors: int) -> NDArray[np.intp]:
    """Validated indices of the sensors bought before the first tree (free for g and f1)."""
    if initial is None:
        return np.zeros(0, dtype=np.intp)
    idx = np.asarray(initial, dtype=np.intp).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n_sensors):
        raise ValueError(
            f"initial_sensors must be sensor indices in range({n_sensors}), got {list(idx)}"
        )
    return idx


def _margin_weight(w: float) -> float:
    """Round to a power of two (or 0) so that ``w · margin`` is exact in float32."""
    return 0.0 if w <= 0 else float(2.0 ** round(math.log2(w)))


def _check_inputs(
    X: NDArray[np.floating], y: NDArray[np.integer], hpc_proba: NDArray[np.floating]
) -> tuple[NDArray[np.float32], NDArray[np.int64], FloatArray]:
    X32 = np.asarray(X, dtype=np.float32)
    yi = np.asarray(y)
    P = np.asarray(hpc_proba, dtype=np.float64)
    if X32.ndim != 2 or X32.shape[0] == 0:
        raise ValueError(f"X must be a non-empty 2-D array, got shape {X32.shape}")
    if np.isinf(X32).any():
        raise ValueError("X contains infinite values; give finite numbers, or NaN for a "
                         "sensor not measured on a row (the trees send NaN right)")
    if P.ndim != 2 or P.shape[0] != X32.shape[0] or P.shape[1] < 2:
        raise ValueError(
            f"hpc_proba must be [n_samples, n_classes>=2] matching X's {X32.shape[0]} rows, "
            f"got shape {P.shape}"
        )
    if yi.shape != (X32.shape[0],) or not np.issubdtype(yi.dtype, np.integer):
        raise ValueError("y must be integer class indices, one per row of X")
    if yi.min() < 0 or yi.max() >= P.shape[1]:
        raise ValueError(f"y must lie in range({P.shape[1]}) (the columns of hpc_proba)")
    return X32, yi.astype(np.int64), P
