"""Baselines: Greedy Miser, the confidence cascade, and the paper's L1 baseline.

- ``GreedyMiser`` (Xu et al., ICML 2012) lives in ``greedy_miser`` (re-exported here).
- ``ConfidenceCascade``: an LPC (boosted trees) on the k best sensors (by cost-blind split
  gain); stop when its max class probability >= ``threshold``, else escalate. The method
  ``confidence`` is its tuned form (``confidence_cascade``: several cheap-model families, k,
  sensor order and threshold all chosen on validation).
- ``L1Baseline`` (Nan & Saligrama's baseline): L1 logistic regression on all data selects the
  sensors; f1 = logistic regression on them; g = logistic regression on them predicting
  whether f1 is wrong (its training errors as pseudo-labels); escalate when
  P(f1 wrong) > ``threshold``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from adaptedge.trainer.export.models import node_model
from adaptedge.trainer.export.trees import tree_core
from adaptedge.trainer.methods.adapt_gbrt import _check_inputs, _sensor_layout
from adaptedge.trainer.methods.cart import feature_gains, quantize
from adaptedge.trainer.methods.gating import CostModel, n_logits, parallel_map, proba
from adaptedge.trainer.methods.greedy_miser import GreedyMiser as GreedyMiser  # re-exported
from adaptedge.trainer.methods.greedy_miser import uniform_hpc
from adaptedge.trainer.methods.labels import class_indices, predicted_labels
from adaptedge.trainer.methods.linear_gate import LinearGateMixin
from adaptedge.trainer.methods.registry import MethodOptions, register
from adaptedge.trainer.policy.graph import Graph
from adaptedge.trainer.policy.one_node import threshold_sweep

FloatArray = NDArray[np.float64]


class ConfidenceCascade(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """LPC on the k best sensors; escalate when its max class probability < ``threshold``."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "k": [Interval(Integral, 1, None, closed="left")],
        "threshold": [Interval(Real, 0.5, 1, closed="left")],
        "n_rounds": [Interval(Integral, 1, None, closed="left")],
        "n_trees": [Interval(Integral, 1, None, closed="left")],
        "max_depth": [Interval(Integral, 1, 12, closed="both")],
        "learning_rate": [Interval(Real, 0, 1, closed="right")],
        "sensor_order": ["array-like", None],
        "feature_sensor": ["array-like", None],
        "sensor_costs": ["array-like", None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        k: int = 4,
        threshold: float = 0.9,
        n_rounds: int = 6,
        n_trees: int = 20,
        max_depth: int = 4,
        learning_rate: float = 0.2,
        sensor_order: Sequence[int] | None = None,
        feature_sensor: Sequence[int] | None = None,
        sensor_costs: Sequence[float] | None = None,
        random_state: int | None = None,
    ) -> None:
        self.k = k
        self.threshold = threshold
        self.n_rounds = n_rounds
        self.n_trees = n_trees
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.sensor_order = sensor_order
        self.feature_sensor = feature_sensor
        self.sensor_costs = sensor_costs
        self.random_state = random_state

    def fit(self, X: NDArray[np.floating], y: NDArray[np.integer],
            hpc_proba: NDArray[np.floating] | None = None) -> ConfidenceCascade:
        self._validate_params()
        classes, yi = class_indices(y, hpc_proba)
        P = uniform_hpc(yi) if hpc_proba is None else hpc_proba
        X32, yi, P = _check_inputs(X, yi, P)
        feature_sensor, sensor_costs = _sensor_layout(
            self.feature_sensor, self.sensor_costs, X32.shape[1])
        order = (rank_sensors(X32, yi, P, feature_sensor) if self.sensor_order is None
                 else np.asarray(self.sensor_order, dtype=np.intp))
        chosen = np.zeros(sensor_costs.size, dtype=bool)
        chosen[order[: self.k]] = True
        columns = np.flatnonzero(chosen[feature_sensor])
        lpc = GreedyMiser(
            gamma=0.0, n_rounds=self.n_rounds, n_trees=self.n_trees, max_depth=self.max_depth,
            learning_rate=self.learning_rate, feature_sensor=feature_sensor[columns].tolist(),
            sensor_costs=sensor_costs.tolist(), random_state=self.random_state,
        ).fit(X32[:, columns], yi, P)
        used_sub = lpc.node_columns()
        self.n_classes_ = P.shape[1]
        self.classes_ = classes
        self.n_features_in_ = X32.shape[1]
        self.lpc_ = lpc
        self.sensor_order_ = order
        self.subset_columns_ = columns
        self.columns_ = tuple(int(columns[c]) for c in used_sub)
        self.sensors_bought_ = np.zeros(sensor_costs.size, dtype=bool)
        self.sensors_bought_[feature_sensor[list(self.columns_)]] = True
        return self

    def decision_logits(self, X: NDArray[np.floating]) -> FloatArray:
        check_is_fitted(self)
        return self.lpc_.decision_logits(np.asarray(X)[:, self.subset_columns_])

    def predict_proba(self, X: NDArray[np.floating]) -> FloatArray:
        return proba(self.decision_logits(X), self.n_classes_)

    def predict(self, X: NDArray[np.floating]) -> NDArray[Any]:
        return predicted_labels(self.classes_, self.predict_proba(X))

    def confidence_cut(self) -> float:
        """Binary: the exact |logit| cut equivalent to ``threshold`` (on the leaf grid)."""
        return float(quantize(math.log(self.threshold / (1 - self.threshold))))

    def gate_score(self, X: NDArray[np.floating]) -> FloatArray:
        """Positive means unsure (escalate): binary ``cut - |z|`` on the exact logit,
        multi-class ``threshold - max probability`` in float32 (as the exported head)."""
        z = self.decision_logits(X)
        if self.n_classes_ == 2:
            out: FloatArray = self.confidence_cut() - np.abs(z[:, 0])
            return out
        p = proba(z, self.n_classes_).astype(np.float32)
        gap: FloatArray = (-(p.max(axis=1) - np.float32(self.threshold))).astype(np.float64)
        return gap

    def escalate(self, X: NDArray[np.floating]) -> NDArray[np.bool_]:
        out: NDArray[np.bool_] = self.gate_score(X) > 0
        return out

    def to_onnx(self) -> bytes:
        check_is_fitted(self)
        used_sub = self.lpc_.node_columns()
        position = {c: i for i, c in enumerate(used_sub)}
        core = tree_core([(t, 0) for t in self.lpc_.f1_trees_], self.lpc_.f1_base_, position)
        cut = self.confidence_cut() if self.n_classes_ == 2 else self.threshold
        return node_model(core, [], len(used_sub), self.n_classes_, "confidence", cut)

    def with_threshold(self, threshold: float) -> ConfidenceCascade:
        import copy

        other = copy.copy(self)
        other.threshold = threshold
        return other


def rank_sensors(X: NDArray[np.float32], y: NDArray[np.int64], P: FloatArray,
                 feature_sensor: NDArray[np.intp]) -> NDArray[np.intp]:
    """Sensors by total split gain of a cost-blind boosted model, best first."""
    gains = sensor_gains(X, y, P, feature_sensor)
    return np.argsort(-gains, kind="stable").astype(np.intp)


def sensor_gains(X: NDArray[np.float32], y: NDArray[np.int64], P: FloatArray,
                 feature_sensor: NDArray[np.intp]) -> FloatArray:
    """Each sensor's total split gain in a small cost-blind boosted model."""
    model = GreedyMiser(gamma=0.0, n_rounds=2, n_trees=10, max_depth=3,
                        feature_sensor=feature_sensor.tolist(),
                        sensor_costs=[1.0] * (int(feature_sensor.max()) + 1)).fit(X, y, P)
    gains = np.zeros(int(feature_sensor.max()) + 1)
    np.add.at(gains, feature_sensor, feature_gains(model.f1_trees_, X.shape[1]))
    return gains


class L1Baseline(LinearGateMixin, ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """The paper's L1 baseline: L1-selected sensors, then f1, then g on f1's correctness."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "threshold": [Interval(Real, 0, 1, closed="neither")],
        "feature_sensor": ["array-like", None],
        "sensor_costs": ["array-like", None],
        "random_state": ["random_state"],
    }

    def __init__(self, *, C: float = 0.1, threshold: float = 0.5,
                 feature_sensor: Sequence[int] | None = None,
                 sensor_costs: Sequence[float] | None = None,
                 random_state: int | None = None) -> None:
        self.C = C
        self.threshold = threshold
        self.feature_sensor = feature_sensor
        self.sensor_costs = sensor_costs
        self.random_state = random_state

    def fit(self, X: NDArray[np.floating], y: NDArray[np.integer],
            hpc_proba: NDArray[np.floating] | None = None) -> L1Baseline:
        self._validate_params()
        rows = _L1Rows.of(self, X, y, hpc_proba)
        return self._fit_heads(rows, _l1_model(self).fit(rows.Z, rows.yi).coef_)

    def _fit_heads(self, rows: _L1Rows, l1_coef: FloatArray) -> L1Baseline:
        """f1 and g on the features of the sensors ``l1_coef`` (the L1 model's) selects."""
        from sklearn.linear_model import LogisticRegression

        selected = np.flatnonzero(np.abs(l1_coef).sum(axis=0) > 1e-8)
        bought = np.zeros(rows.sensor_costs.size, dtype=bool)
        bought[rows.feature_sensor[selected]] = True
        columns = np.flatnonzero(bought[rows.feature_sensor])
        n_classes, yi = rows.P.shape[1], rows.yi
        k = n_logits(n_classes)
        W = np.zeros((columns.size, k + 1))
        b = np.zeros(k + 1)
        if columns.size:
            Zc = rows.Z[:, columns]
            f1 = LogisticRegression(C=1.0, max_iter=2000).fit(Zc, yi)
            W[:, :k] = f1.coef_.T if k > 1 else f1.coef_.T[:, :1]
            b[:k] = f1.intercept_[:k]
            wrong = (Zc @ W[:, :k] + b[:k]).argmax(axis=1) != yi if k > 1 else (
                (Zc @ W[:, 0] + b[0] > 0).astype(np.int64) != yi)
            if 0 < wrong.sum() < wrong.size:
                g = LogisticRegression(C=1.0, max_iter=2000).fit(Zc, wrong)
                W[:, k] = g.coef_[0]
                b[k] = g.intercept_[0]
            else:
                b[k] = 20.0 if wrong.all() else -20.0
        # fold the standardisation into raw-feature weights
        self.coef_ = W / rows.std[columns][:, None]
        self.intercept_ = b - (rows.mean[columns] / rows.std[columns]) @ W
        self.n_classes_ = n_classes
        self.classes_ = rows.classes
        self.n_features_in_ = rows.Z.shape[1]
        self.columns_ = tuple(int(c) for c in columns)
        self.sensors_bought_ = bought
        return self

    def _bias(self) -> FloatArray:
        b: FloatArray = self.intercept_.copy()
        b[-1] -= math.log(self.threshold / (1 - self.threshold))
        return b

    def with_threshold(self, threshold: float) -> L1Baseline:
        import copy

        other = copy.copy(self)
        other.threshold = threshold
        return other


@dataclass(frozen=True)
class _L1Rows:
    """What every fit of the L1 baseline shares: the standardised rows, labels, layout."""

    Z: FloatArray
    yi: NDArray[np.int64]
    P: FloatArray
    classes: Any
    mean: FloatArray
    std: FloatArray
    feature_sensor: NDArray[np.intp]
    sensor_costs: FloatArray

    @staticmethod
    def of(model: L1Baseline, X: Any, y: Any, hpc_proba: Any) -> _L1Rows:
        classes, yi = class_indices(y, hpc_proba)
        P = uniform_hpc(yi) if hpc_proba is None else hpc_proba
        X32, yi, P = _check_inputs(X, yi, P)
        feature_sensor, sensor_costs = _sensor_layout(
            model.feature_sensor, model.sensor_costs, X32.shape[1])
        mean = X32.mean(axis=0, dtype=np.float64)
        std = X32.std(axis=0, dtype=np.float64)
        std[std == 0] = 1.0
        return _L1Rows((X32 - mean) / std, yi, P, classes, mean, std, feature_sensor,
                       sensor_costs)


def _l1_model(model: L1Baseline, *, warm_start: bool = False) -> Any:
    """The L1 logistic regression (saga) that selects ``model``'s sensors."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(**l1_penalty(), solver="saga", C=model.C, max_iter=3000,
                              random_state=model.random_state, warm_start=warm_start)


def l1_path(models: Sequence[L1Baseline], X: Any, y: Any,
            hpc_proba: Any = None) -> list[L1Baseline]:
    """``models`` (same layout and seed, ``C`` ascending) fitted along one regularisation path:
    each L1 fit starts from the previous one's solution, as scikit-learn's own path does
    (``LogisticRegressionCV``). On gas saga ran into its 3,000-epoch cap from a cold start for
    5 of 8 values of C (161 CPU s); warm, the same path takes 66 CPU s."""
    if not models:
        return []
    if any(a.C >= b.C for a, b in pairwise(models)):
        raise ValueError("l1_path takes its models in ascending C")
    for m in models:
        m._validate_params()
    rows = _L1Rows.of(models[0], X, y, hpc_proba)
    l1 = _l1_model(models[0], warm_start=True)
    return [m._fit_heads(rows, l1.set_params(C=m.C).fit(rows.Z, rows.yi).coef_)
            for m in models]


def l1_penalty(version: str | None = None) -> dict[str, Any]:
    """``LogisticRegression`` keywords for a pure L1 penalty on scikit-learn ``version``
    (default: the installed one). Before 1.8 ``l1_ratio`` is ignored unless
    ``penalty="elasticnet"`` (``l1_ratio=1.0`` alone is an L2 model); from 1.8 ``penalty`` is
    deprecated and ``l1_ratio=1.0`` is L1."""
    if version is None:
        import sklearn

        version = sklearn.__version__
    major, minor = (int(part) for part in re.findall(r"\d+", version)[:2])
    if (major, minor) < (1, 8):
        return {"penalty": "l1"}
    return {"l1_ratio": 1.0}


# -- registered sweeps ------------------------------------------------------------------------
L1_CHAINS = 2
"""The L1 baseline's C grid is fitted as this many contiguous warm-started stretches (the
parallel unit), fixed so that ``--jobs`` does not change the bundle."""


def _layout(dataset: Any, hpc: Any) -> tuple[CostModel, dict[str, Any]]:
    cm = CostModel.build(dataset.sensors, dataset.cost_weights, dataset.link,
                         dataset.n_features, hpc.sensors)
    return cm, {"feature_sensor": cm.feature_sensor.tolist(),
                "sensor_costs": cm.sensor_costs.tolist()}


def _fit_path(job: tuple[list[dict[str, Any]], Any, Any, Any]) -> list[L1Baseline]:
    params, X, y, P = job
    return l1_path([L1Baseline(**p) for p in params], X, y, P)


@register("l1")
def l1_method(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    cm, layout = _layout(dataset, hpc)
    Cs = np.geomspace(1e-3, 1.0, 8 if options.quick else 31)
    # L1_CHAINS warm-started stretches of the path, whatever --jobs is (the same bundle)
    jobs = [([{**layout, "C": float(c), "random_state": options.seed} for c in chain],
             dataset.X_train, dataset.y_train, hpc.oof_proba_train)
            for chain in np.array_split(Cs, L1_CHAINS)]
    models = [m for path in parallel_map(_fit_path, jobs, options.n_jobs, options.progress,
                                         "l1 paths") for m in path]
    grid = [0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    return threshold_sweep("l1", models, grid, dataset, hpc, cm, ("C", "threshold"))
