"""The confidence cascade at full strength (``--method confidence``): read the k best sensors,
answer with a strong cheap classifier, escalate when its top class probability is below t.

Every knob is swept and the choice is left to validation (the merged validation front, then
the paired rule of ``train``): the cheap-model family (``hgb``: scikit-learn's
HistGradientBoosting, ``gbt``: the trainer's own boosted trees, ``lr``: standardised logistic
regression), the sensor count k, the sensor order (by cost-blind split gain, or by gain per
unit cost) and the threshold t (``quantiles`` validation quantiles of the top probability).
The cheap model learns the true labels on the training rows. Its ONNX export (the same
``probabilities`` contract as every node) is what validation is measured on, so the walk and
the device agree bit for bit: ``s = max probability - t`` in float32, stop when ``s >= 0``.
``ConfidenceCascade`` (``methods.baselines``) remains the scikit-learn estimator of the
original, weaker form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.manifest import PROBA_OUTPUT
from adaptedge.trainer.errors import ParamError
from adaptedge.trainer.export.run import run_node
from adaptedge.trainer.methods.gating import CostModel, parallel_map
from adaptedge.trainer.methods.registry import MethodOptions, register
from adaptedge.trainer.policy.frontier import Front, pareto_frontier
from adaptedge.trainer.policy.graph import FloatArray, Graph, GraphAction, GraphNode
from adaptedge.trainer.policy.one_node import ROOT, validated

FAMILIES = ("hgb", "gbt", "lr")
ORDERS = ("gain", "cost-aware", "both")
MAX_K = 12
"""Sensor counts swept by default: 1 .. min(sensors, MAX_K), then a quarter, 3/8, half and
3/4 of the sensors (``default_ks``)."""


@dataclass(frozen=True)
class CascadeSettings:
    """The sweep (``trainer.methods.params`` ``confidence`` keys)."""

    families: tuple[str, ...] = FAMILIES
    ks: tuple[int, ...] = ()
    """Sensor counts; empty: ``default_ks``."""
    order: str = "both"
    quantiles: int = 61
    hgb_iter: int = 300

    @classmethod
    def from_options(cls, options: MethodOptions, n_sensors: int) -> CascadeSettings:
        """The settings of ``options`` (``--quick``: hgb and lr, k in {1, 2, 4, 6}, 50
        iterations, 21 quantiles), overridden by ``options.extra``."""
        quick = options.quick
        base = cls(families=("hgb", "lr") if quick else FAMILIES,
                   ks=(1, 2, 4, 6) if quick else default_ks(n_sensors),
                   order="gain" if quick else "both",
                   quantiles=21 if quick else 61, hgb_iter=50 if quick else 300)
        extra = options.extra
        families = tuple(f.strip() for f in str(extra.get("families", ",".join(base.families)))
                         .split(",") if f.strip())
        unknown = [f for f in families if f not in FAMILIES]
        if unknown or not families:
            raise ParamError(f"families must be a comma-separated subset of "
                             f"{','.join(FAMILIES)}, got {extra.get('families')!r}")
        ks = tuple(int(k) for k in extra.get("ks", base.ks))
        ks = tuple(sorted({min(k, n_sensors) for k in ks if k >= 1}))
        return cls(families=families, ks=ks, order=str(extra.get("order", base.order)),
                   quantiles=int(extra.get("quantiles", base.quantiles)),
                   hgb_iter=int(extra.get("hgb_iter", base.hgb_iter)))


def default_ks(n_sensors: int) -> tuple[int, ...]:
    """1 .. min(n_sensors, MAX_K), and 1/4, 3/8, 1/2 and 3/4 of ``n_sensors`` (many sensors:
    a strong cheap model may need more than MAX_K)."""
    ks = set(range(1, min(n_sensors, MAX_K) + 1))
    ks |= {max(1, round(n_sensors * f)) for f in (0.25, 0.375, 0.5, 0.75)}
    return tuple(sorted(ks))


def sensor_orders(dataset: Any, hpc: Any, cm: CostModel, order: str
                  ) -> dict[str, NDArray[np.intp]]:
    """Sensors best first by cost-blind split gain (``gain``) and/or gain per unit cost
    (``cost-aware``), from a boosted model on the training rows and the HPC's out-of-fold
    probabilities (``baselines.sensor_gains``)."""
    from adaptedge.trainer.methods.adapt_gbrt import _check_inputs
    from adaptedge.trainer.methods.baselines import sensor_gains

    X32, yi, P = _check_inputs(dataset.X_train, dataset.y_train, hpc.oof_proba_train)
    gains = sensor_gains(X32, yi, P, cm.feature_sensor.astype(np.intp))
    out: dict[str, NDArray[np.intp]] = {}
    if order in ("gain", "both"):
        out["gain"] = np.argsort(-gains, kind="stable").astype(np.intp)
    if order in ("cost-aware", "both"):
        per_cost = gains / np.maximum(cm.sensor_costs, 1e-12)
        out["cost-aware"] = np.argsort(-per_cost, kind="stable").astype(np.intp)
    return out


def fit_cheap(job: tuple[str, NDArray[Any], NDArray[Any], int, int, int]) -> bytes:
    """ONNX ``probabilities`` of a cheap model of ``family`` fitted on (X, y): a job of
    ``parallel_map`` (family, X of the node's columns, y, classes, seed, hgb iterations)."""
    family, X, y, n_classes, seed, hgb_iter = job
    from threadpoolctl import threadpool_limits

    X32 = np.asarray(X, dtype=np.float32)
    with threadpool_limits(limits=1):
        if family == "gbt":
            return _gbt_onnx(X32, y, n_classes, seed)
        return _sklearn_onnx(family, X32, y, seed, hgb_iter)


def _sklearn_onnx(family: str, X: NDArray[np.float32], y: NDArray[Any], seed: int,
                  hgb_iter: int) -> bytes:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from adaptedge.trainer.export.sklearn import sklearn_to_onnx

    model: Any
    if family == "hgb":
        model = HistGradientBoostingClassifier(max_iter=hgb_iter, early_stopping=False,
                                               random_state=seed)
    else:
        model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    model.fit(X, y)
    data: bytes = sklearn_to_onnx(model, X.shape[1]).SerializeToString()
    return data


def _gbt_onnx(X: NDArray[np.float32], y: NDArray[Any], n_classes: int, seed: int) -> bytes:
    from adaptedge.trainer.export.models import node_model
    from adaptedge.trainer.export.trees import tree_core
    from adaptedge.trainer.methods.greedy_miser import GreedyMiser, uniform_hpc

    yi = np.asarray(y, dtype=np.int64)
    P = uniform_hpc(yi)
    if P.shape[1] < n_classes:
        P = np.pad(P, ((0, 0), (0, n_classes - P.shape[1])))
    lpc = GreedyMiser(gamma=0.0, n_rounds=6, n_trees=20, max_depth=4, learning_rate=0.2,
                      random_state=seed).fit(X, yi, P)
    core = tree_core([(t, 0) for t in lpc.f1_trees_], lpc.f1_base_,
                     {c: c for c in range(X.shape[1])})
    return node_model(core, [], X.shape[1], n_classes, "stop")


def confidence_model(classifier: bytes, threshold: float) -> bytes:
    """``classifier`` (x -> ``probabilities``) with the head ``action_scores = [s, -s]``,
    ``s = max probability - threshold`` (float32): stop when ``s >= 0``."""
    import onnx

    from adaptedge.trainer.export.graph import GraphBuilder
    from adaptedge.trainer.export.heads import _two_actions

    model = onnx.load_from_string(classifier)
    n_inputs = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    b = GraphBuilder(int(n_inputs))
    b.include(model)
    b.const("conf_t", [threshold])
    b.add("ReduceMax", [PROBA_OUTPUT], ["conf_m"], axes=[1], keepdims=1)
    b.add("Sub", ["conf_m", "conf_t"], ["conf_s"])
    b.add("Neg", ["conf_s"], ["conf_neg_s"])
    _two_actions(b, "conf_s", "conf_neg_s")
    return b.to_bytes()


def stop_margin(proba32: NDArray[np.float32], threshold: float) -> NDArray[np.float32]:
    """``s = max probability - threshold`` in float32, as the exported head computes it."""
    out: NDArray[np.float32] = proba32.max(axis=1) - np.float32(threshold)
    return out


@dataclass(frozen=True)
class ConfidenceNode:
    """A node model: the cheap classifier's ONNX and the threshold; float64 outputs widened
    from onnxruntime's float32 ones."""

    classifier: bytes
    threshold: float

    def proba(self, X: NDArray[np.floating]) -> FloatArray:
        return run_node(self.classifier, X)[PROBA_OUTPUT].astype(np.float64)

    def action_scores(self, X: NDArray[np.floating]) -> FloatArray | None:
        s = stop_margin(run_node(self.classifier, X)[PROBA_OUTPUT], self.threshold)
        return np.stack([s, -s], axis=1).astype(np.float64)

    def to_onnx(self) -> bytes:
        return confidence_model(self.classifier, self.threshold)


def quantile_thresholds(top: NDArray[np.float32], n: int) -> list[float]:
    """``n`` quantiles (0..1) of the validation top probabilities as float32 values, distinct."""
    qs = np.quantile(top.astype(np.float64), np.linspace(0.0, 1.0, n))
    return sorted({float(np.float32(q)) for q in qs})


def _graphs(dataset: Any, hpc: Any, cm: CostModel, classifier: bytes, bought: NDArray[np.bool_],
            label: dict[str, float | str], quantiles: int) -> list[Graph]:
    """One validated graph per validation-quantile threshold of one fitted cheap model."""
    inputs = cm.node_columns(bought)
    proba32 = run_node(classifier, np.asarray(dataset.X_val)[:, list(inputs)])[PROBA_OUTPUT]
    proba_val = proba32.astype(np.float64)
    out = []
    for q, t in enumerate(quantile_thresholds(proba32.max(axis=1), quantiles)):
        params: dict[str, float | str] = {**label, "threshold": t}
        node = GraphNode(sensors=cm.node_sensor_names(bought), inputs=inputs,
                         actions=(GraphAction("stop"), GraphAction("escalate")),
                         model=ConfidenceNode(classifier, t))
        name = f"confidence-{label['family']}-{label['order']}-k{int(label['k'])}-q{q:02d}"
        graph = Graph(name, ROOT, {ROOT: node}, params=params, method="confidence")
        gate = -stop_margin(proba32, t).astype(np.float64)
        out.append(validated(graph, dataset, hpc, cm, proba_val, gate))
    return out


@register("confidence")
def confidence_cascade_method(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """Every (family, order, k, threshold) of the sweep, validated; the validation front."""
    cm = CostModel.build(dataset.sensors, dataset.cost_weights, dataset.link,
                         dataset.n_features, hpc.sensors)
    settings = CascadeSettings.from_options(options, len(dataset.sensors))
    if settings.order not in ORDERS:
        raise ParamError(f"order must be one of {', '.join(ORDERS)}, got {settings.order!r}")
    orders = sensor_orders(dataset, hpc, cm, settings.order)
    subsets: dict[tuple[int, ...], list[tuple[str, int]]] = {}
    for name, order in orders.items():
        for k in settings.ks:
            key = tuple(sorted(int(s) for s in order[:k]))
            subsets.setdefault(key, []).append((name, k))
    keys = list(subsets)
    n_classes = len(dataset.classes)
    jobs = []
    for key in keys:
        bought = np.zeros(len(dataset.sensors), dtype=bool)
        bought[list(key)] = True
        cols = list(cm.node_columns(bought))
        jobs += [(f, np.asarray(dataset.X_train)[:, cols], np.asarray(dataset.y_train),
                  n_classes, options.seed, settings.hgb_iter) for f in settings.families]
    models = parallel_map(fit_cheap, jobs, options.n_jobs, options.progress, "confidence")
    out: list[Graph] = []
    for i, key in enumerate(keys):
        bought = np.zeros(len(dataset.sensors), dtype=bool)
        bought[list(key)] = True
        order_name, k = subsets[key][0]
        for j, family in enumerate(settings.families):
            label: dict[str, float | str] = {"family": family, "order": order_name,
                                             "k": float(k)}
            out += _graphs(dataset, hpc, cm, models[i * len(settings.families) + j], bought,
                           label, settings.quantiles)
    return Front(pareto_frontier(out), len(out))


def swept_knobs(graphs: Sequence[Graph]) -> dict[str, set[float | str]]:
    """The values each knob takes over ``graphs`` (for reports and tests)."""
    out: dict[str, set[float | str]] = {}
    for g in graphs:
        for key, value in g.params.items():
            out.setdefault(key, set()).add(value)
    return out
