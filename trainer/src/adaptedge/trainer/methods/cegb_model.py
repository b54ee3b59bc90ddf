"""One CEGB booster (Peter et al., NeurIPS 2017, as LightGBM's ``cegb_*`` options) as a gated
node model: LightGBM grows the trees, the trainer owns them afterwards.

``fit_cegb`` trains up to ``n_rounds`` rounds with the validation rows as LightGBM's
``valid_sets`` (early stopping on validation log-loss) and keeps the round with the lowest
validation error (or log-loss). The kept trees are converted from ``dump_model()``
(``export.lightgbm_trees``) with their leaf values rounded to ``cart.LEAF_QUANTUM``, so the
float64 sums here equal onnxruntime's float32 sums and the walk, the exported ONNX and the edge
runtime take the same decisions. The model escalates when its logit margin (binary ``|z|``,
multi-class the top-1 minus the top-2 logit) is below ``threshold``, a cut on the same grid:
the ``gate`` head of ``export.models`` with margin weight 1, exact in float32 for any number
of classes. LightGBM is imported only while fitting.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from adaptedge.trainer.errors import MissingExtraError, TrainError
from adaptedge.trainer.export.lightgbm_trees import lightgbm_trees
from adaptedge.trainer.export.models import node_model
from adaptedge.trainer.export.trees import TreeArrays, float32_thresholds, tree_core
from adaptedge.trainer.methods.cart import quantize
from adaptedge.trainer.methods.gating import n_logits, proba

FloatArray = NDArray[np.float64]
INSTALL_HINT = ("method cegb needs lightgbm, which is not installed: "
                "pip install 'adaptedge-trainer[lightgbm]' (or 'adaptedge[train]')")


def import_lightgbm() -> Any:
    """The ``lightgbm`` module, or a ``MissingExtraError`` saying in one line how to get it."""
    try:
        import lightgbm
    except ImportError as exc:
        raise MissingExtraError(INSTALL_HINT) from exc
    return lightgbm


@dataclass(frozen=True)
class BoostSettings:
    """LightGBM knobs every fit of a sweep shares (the CEGB penalties vary per fit)."""

    n_rounds: int = 1000
    patience: int = 100
    """Early stopping: rounds without a better validation log-loss."""
    learning_rate: float = 0.1
    num_leaves: int = 31
    min_data_in_leaf: int = 20
    penalty_split: float = 0.0
    """``cegb_penalty_split`` (per row of a split leaf, times the tradeoff)."""
    iteration: Literal["error", "logloss"] = "error"
    """The validation metric whose best round is kept."""


@dataclass(frozen=True)
class Penalties:
    """CEGB's feature penalties of one fit: ``cegb_tradeoff`` x per-feature price vectors."""

    coupled: float
    """Price of a feature the first time the model uses it, in units of split gain per
    training row (multiplied by the row count, as gains grow with it)."""
    lazy: float
    """Price per row the first time a row's path uses a feature."""


class CegbModel:
    """The kept trees of one fitted booster; ``threshold`` is the escalation cut."""

    def __init__(self, trees: Sequence[tuple[TreeArrays, int]], n_classes: int,
                 feature_sensor: NDArray[np.int64], n_sensors: int, rounds: int,
                 curve: FloatArray, penalties: Penalties, booster: Any,
                 threshold: float = 0.0) -> None:
        self.trees = tuple(trees)
        self.n_classes = n_classes
        self.n_features = len(feature_sensor)
        self.rounds = rounds
        self.validation_curve = curve
        """The validation metric after each round (``BoostSettings.iteration``)."""
        self.penalties = penalties
        self.booster = booster
        self.threshold = float(quantize(threshold))
        used = sorted({int(f) for t, _ in self.trees for f in t.feature if f >= 0})
        self.features_used = tuple(used)
        self.sensors_bought_ = np.zeros(n_sensors, dtype=bool)
        self.sensors_bought_[np.asarray(feature_sensor)[used]] = True
        self._inputs = tuple(int(j) for j in np.flatnonzero(
            self.sensors_bought_[np.asarray(feature_sensor)]))
        self._stacked = _stack(self.trees, n_logits(n_classes))
        self._cache: dict[bytes, FloatArray] = {}

    def decision_logits(self, X: NDArray[np.floating]) -> FloatArray:
        """[N, n_logits] raw scores of full feature rows (float32 routing, exact sums)."""
        X32 = np.ascontiguousarray(X, dtype=np.float32)
        key = hashlib.blake2b(X32.tobytes(), digest_size=16).digest() + bytes(str(X32.shape),
                                                                              "ascii")
        if key not in self._cache:
            self._cache.clear()  # one split at a time: the sweep asks for it repeatedly
            self._cache[key] = _logits(self._stacked, X32)
        return self._cache[key]

    def predict_proba(self, X: NDArray[np.floating]) -> FloatArray:
        return proba(self.decision_logits(X), self.n_classes)

    def confidence(self, z: FloatArray) -> FloatArray:
        """The logit margin: ``|z|`` (binary) or the top-1 minus the top-2 logit; exact, as
        the logits are sums on the leaf grid."""
        if self.n_classes == 2:
            out: FloatArray = np.abs(z[:, 0])
            return out
        top2 = np.sort(z, axis=1)[:, -2:]
        margin: FloatArray = top2[:, 1] - top2[:, 0]
        return margin

    def gate_from_logits(self, z: FloatArray) -> FloatArray:
        """Positive means escalate: ``threshold - margin`` (exact in float32 too)."""
        gap: FloatArray = self.threshold - self.confidence(z)
        return gap

    def gate_score(self, X: NDArray[np.floating]) -> FloatArray:
        return self.gate_from_logits(self.decision_logits(X))

    def with_threshold(self, threshold: float) -> CegbModel:
        other = copy.copy(self)
        other.threshold = float(quantize(threshold))
        return other

    def to_onnx(self) -> bytes:
        """The node model over the node's input columns (every column of a bought sensor):
        the trees' logits, then a gate column holding the cut, less the logit margin
        (``export.heads.gate`` with margin weight 1)."""
        position = {c: i for i, c in enumerate(self._inputs)}
        base = np.zeros(n_logits(self.n_classes) + 1)
        base[-1] = self.threshold
        core = tree_core(self.trees, base, position)
        return node_model(core, [], len(self._inputs), self.n_classes, "gate",
                          margin_weight=1.0)


@dataclass(frozen=True)
class _Stacked:
    """Every tree's nodes in one array set (node ids offset per tree) for a joint walk."""

    roots: NDArray[np.int64]
    target: NDArray[np.int64]
    feature: NDArray[np.int64]
    threshold: NDArray[np.float32]
    left: NDArray[np.int64]
    right: NDArray[np.int64]
    missing_left: NDArray[np.bool_]
    value: FloatArray
    n_targets: int


def _stack(trees: Sequence[tuple[TreeArrays, int]], n_targets: int) -> _Stacked:
    sizes = [len(t.feature) for t, _ in trees]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if trees else \
        np.zeros(0, np.int64)

    def cat(parts: list[Any], dtype: Any) -> Any:
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

    shift = [np.where(t.left >= 0, t.left + o, -1) for (t, _), o in zip(trees, offsets,
                                                                       strict=True)]
    shift_r = [np.where(t.right >= 0, t.right + o, -1) for (t, _), o in zip(trees, offsets,
                                                                           strict=True)]
    return _Stacked(
        roots=offsets, target=np.array([k for _, k in trees], np.int64),
        feature=cat([t.feature for t, _ in trees], np.int64),
        threshold=cat([float32_thresholds(t.threshold) for t, _ in trees], np.float32),
        left=cat(shift, np.int64), right=cat(shift_r, np.int64),
        missing_left=cat([t.missing_left if t.missing_left is not None
                          else np.zeros(len(t.feature), bool) for t, _ in trees], bool),
        value=cat([np.asarray(t.value, np.float64).ravel() for t, _ in trees], np.float64),
        n_targets=n_targets)


def _logits(s: _Stacked, X32: NDArray[np.float32]) -> FloatArray:
    """Every row's raw scores, in row chunks of about a million (row, tree) pairs."""
    out = np.zeros((X32.shape[0], s.n_targets))
    if not s.roots.size:
        return out
    step = max(1, 2**20 // s.roots.size)
    for start in range(0, X32.shape[0], step):
        out[start:start + step] = _chunk_logits(s, X32[start:start + step])
    return out


def _chunk_logits(s: _Stacked, X32: NDArray[np.float32]) -> FloatArray:
    """Route every row through every tree at once (``x <= t`` in float32, NaN to its side)."""
    n = X32.shape[0]
    out = np.zeros((n, s.n_targets))
    node = np.broadcast_to(s.roots, (n, s.roots.size)).copy()
    rows = np.arange(n)[:, None]
    for _ in range(int(s.feature.size)):
        feat = s.feature[node]
        inner = feat >= 0
        if not inner.any():
            break
        x = X32[rows, np.where(inner, feat, 0)]
        go_left = np.where(np.isnan(x), s.missing_left[node], x <= s.threshold[node])
        node = np.where(inner, np.where(go_left, s.left[node], s.right[node]), node)
    leaf_values = s.value[node]
    for k in range(s.n_targets):
        out[:, k] = leaf_values[:, s.target == k].sum(axis=1)
    return out


def fit_cegb(X: NDArray[np.floating], y: NDArray[np.int64], X_val: NDArray[np.floating],
             y_val: NDArray[np.int64], n_classes: int, feature_sensor: NDArray[np.int64],
             sensor_costs: FloatArray, penalties: Penalties, settings: BoostSettings,
             seed: int = 0) -> CegbModel:
    """Train one CEGB booster, keep its best validation round, convert its trees."""
    lgb = import_lightgbm()
    X32, V32 = np.asarray(X, np.float32), np.asarray(X_val, np.float32)
    params = _lightgbm_params(n_classes, len(y), feature_sensor, sensor_costs, penalties,
                              settings, seed)
    train = lgb.Dataset(X32, label=y, params={"verbosity": -1}, free_raw_data=False)
    valid = lgb.Dataset(V32, label=y_val, reference=train)
    record: dict[str, dict[str, list[float]]] = {}
    booster = lgb.train(params, train, num_boost_round=settings.n_rounds, valid_sets=[valid],
                        valid_names=["validation"], keep_training_booster=True,  # all trees
                        callbacks=[lgb.early_stopping(settings.patience, first_metric_only=True,
                                                      verbose=False),
                                   lgb.record_evaluation(record)])
    curves = record["validation"]
    name = next(m for m in curves if m.endswith("error" if settings.iteration == "error"
                                            else "logloss"))
    curve = np.asarray(curves[name], np.float64)
    rounds = int(np.argmin(curve)) + 1  # the first best round: the fewest trees
    trees = [(replace(t, value=quantize(np.asarray(t.value, np.float64))), k)
             for t, k in lightgbm_trees(booster.dump_model(num_iteration=rounds), rounds)]
    if len(trees) != rounds * booster.num_model_per_iteration():
        raise TrainError(f"LightGBM kept {len(trees)} trees, expected {rounds} rounds of "
                         f"{booster.num_model_per_iteration()}: report this with your "
                         f"lightgbm version")
    return CegbModel(trees, n_classes, np.asarray(feature_sensor, np.int64),
                     len(sensor_costs), rounds, curve, penalties, booster)


def feature_prices(feature_sensor: NDArray[np.int64], sensor_costs: FloatArray) -> FloatArray:
    """Each feature's share of its sensor's cost (a sensor's columns split it evenly), in
    units of the mean sensor cost: CEGB prices features, the device reads sensors."""
    fs = np.asarray(feature_sensor, np.int64)
    costs = np.asarray(sensor_costs, np.float64)
    share = costs[fs] / np.bincount(fs, minlength=costs.size)[fs]
    scale = float(costs.mean()) if costs.size and costs.mean() > 0 else 1.0
    out: FloatArray = share / scale
    return out


def _lightgbm_params(n_classes: int, n_rows: int, feature_sensor: NDArray[np.int64],
                     sensor_costs: FloatArray, penalties: Penalties, settings: BoostSettings,
                     seed: int) -> dict[str, Any]:
    prices = feature_prices(feature_sensor, sensor_costs).tolist()
    binary = n_classes == 2
    params: dict[str, Any] = {
        "objective": "binary" if binary else "multiclass",
        "metric": ["binary_logloss", "binary_error"] if binary
        else ["multi_logloss", "multi_error"],
        "learning_rate": settings.learning_rate, "num_leaves": settings.num_leaves,
        "min_data_in_leaf": settings.min_data_in_leaf, "num_threads": 1, "seed": seed,
        "deterministic": True, "force_row_wise": True, "verbosity": -1,
        "zero_as_missing": False, "cegb_tradeoff": 1.0,
        "cegb_penalty_split": settings.penalty_split,
    }
    if not binary:
        params["num_class"] = n_classes
    if penalties.coupled > 0:
        params["cegb_penalty_feature_coupled"] = [penalties.coupled * n_rows * p for p in prices]
    if penalties.lazy > 0:
        params["cegb_penalty_feature_lazy"] = [penalties.lazy * p for p in prices]
    return params
