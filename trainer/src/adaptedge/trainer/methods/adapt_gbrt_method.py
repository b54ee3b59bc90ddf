"""``adaptedge train --method adapt-gbrt``: the ADAPT-GBRT sweep as one-node graphs.

Sweeps (P_full, γ) from an empty bought set (the paper) and from each warm-start set
(``trainer.methods.warm_start``), and, per fitted model, the gate threshold and the margin weight
(both post-hoc, on validation); returns the validation-Pareto graphs.
``extra={"warm_start": False}`` gives the paper's sweep alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adaptedge.trainer.methods.adapt_gbrt import AdaptGbrtClassifier, gate_score_from
from adaptedge.trainer.methods.cart import quantize
from adaptedge.trainer.methods.gating import CostModel, parallel_map, proba
from adaptedge.trainer.methods.params import check_params
from adaptedge.trainer.methods.registry import MethodOptions, register
from adaptedge.trainer.policy.frontier import pareto_frontier
from adaptedge.trainer.policy.graph import FloatArray, Graph, Metrics
from adaptedge.trainer.policy.one_node import one_node_graph, validation_metrics

DEFAULT_GRID: dict[str, tuple[float, ...]] = {
    "p_full": (0.1, 0.2),
    "gamma": (5e-4, 1e-3, 2e-3),
}
DEFAULTS: dict[str, Any] = {"n_rounds": 8, "n_trees": 20, "max_depth": 5, "refine_rounds": 12,
                            "min_samples_leaf": 40}
QUICK_GRID: dict[str, tuple[float, ...]] = {"p_full": (0.2, 0.3), "gamma": (1e-3, 3e-3)}
WARM_GRID: dict[str, tuple[float, ...]] = {"p_full": (0.1, 0.2), "gamma": (2e-3,)}
"""Fits per warm-start sensor set (``trainer.methods.warm_start``), next to the paper's grid."""
QUICK_WARM_FRACTIONS = (0.92,)
N_THRESHOLDS = 24
MARGIN_WEIGHTS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)


ValOutputs = tuple[FloatArray, FloatArray]
"""A fit's LPC logits and raw gate ``g`` on the validation rows."""
Variant = tuple[float, float, Metrics]
"""One gate variant of a fit: (margin weight, gate threshold, its validation metrics)."""


@dataclass(frozen=True)
class GateRows:
    """What walking a fit's gate variants on validation needs (sent to the fit's worker)."""

    X_val: NDArray[np.floating[Any]]
    y_val: NDArray[np.int64]
    hpc_proba_val: FloatArray
    cost_model: CostModel
    margin_weights: tuple[float, ...]

    @classmethod
    def of(cls, dataset: Any, hpc: Any, cost_model: CostModel,
           margin_weights: Sequence[float]) -> GateRows:
        return cls(dataset.X_val, dataset.y_val, hpc.proba_val, cost_model,
                   tuple(margin_weights))


def _fit_one(job: tuple[dict[str, Any], Any, Any, Any, GateRows]
             ) -> tuple[AdaptGbrtClassifier, list[Variant]]:
    """Fit one setting, and walk its gate variants on the validation rows in the same worker
    (the trees run once; each variant only shifts and compares)."""
    params, X, y, P, rows = job
    model = AdaptGbrtClassifier(**params).fit(X, y, P)
    return model, gate_variants(model, rows)


def val_outputs(model: AdaptGbrtClassifier, X_val: Any) -> ValOutputs:
    """``(decision_logits(X_val), gate_raw(X_val))``: every tree walked once per fit."""
    return model.decision_logits(X_val), model.gate_raw(X_val)


def gate_variants(model: AdaptGbrtClassifier, rows: GateRows) -> list[Variant]:
    """Every (margin weight, threshold) variant of ``model`` with its validation metrics: the
    thresholds at quantiles of each weight's gate scores (``threshold_candidates``). No
    variant for a model that reads nothing (always escalating, it is the HPC itself)."""
    if not model.sensors_bought_.any():
        return []
    logits, g_val = val_outputs(model, rows.X_val)
    proba_val = proba(logits, model.n_classes_)
    margin_val = model.lpc_margin(rows.X_val, logits)
    table = rows.cost_model.table()
    # the walk takes the node's outputs from proba_val and the score, not from its model: the
    # variants share this graph (the same sensors and actions)
    graph = one_node_graph("", "", rows.cost_model, model, True, {})
    out: list[Variant] = []
    for w in rows.margin_weights:
        raw = gate_score_from(g_val, margin_val, 0.0, w)
        for tau in threshold_candidates(raw):
            variant = model.with_threshold(tau, w)
            score = gate_score_from(g_val, margin_val, variant.gate_threshold,
                                    variant.margin_weight)
            out.append((w, variant.gate_threshold, validation_metrics(
                graph, rows.X_val, rows.y_val, rows.hpc_proba_val, table, proba_val, score)))
    return out


def threshold_candidates(scores: FloatArray, n: int = N_THRESHOLDS) -> list[float]:
    """Gate thresholds at quantiles of validation gate scores (escalation rates 0..~60%)."""
    qs = np.quantile(scores, np.linspace(0.4, 1.0, n))
    return sorted({float(quantize(v)) for v in qs})


def sweep_settings(dataset: Any, hpc: Any, options: MethodOptions, cost_model: CostModel
                   ) -> list[dict[str, Any]]:
    """The estimator parameters of every fit: the (P_full, γ) grid, then the warm starts."""
    grid = QUICK_GRID if options.quick else DEFAULT_GRID
    grid = {**grid, **{k: tuple(v) for k, v in options.extra.get("grid", {}).items()}}
    base: dict[str, Any] = dict(
        feature_sensor=cost_model.feature_sensor.tolist(),
        sensor_costs=cost_model.sensor_costs.tolist(), random_state=options.seed,
        **({"n_rounds": 4, "n_trees": 8, "refine_rounds": 2} if options.quick else DEFAULTS),
    )
    base.update(options.extra.get("params", {}))
    settings = [{**base, "p_full": p, "gamma": g}
                for p in grid["p_full"] for g in grid["gamma"]]
    if options.extra.get("warm_start", True):
        from adaptedge.trainer.methods.warm_start import DEFAULT_FRACTIONS, warm_start_sets

        fractions = QUICK_WARM_FRACTIONS if options.quick else DEFAULT_FRACTIONS
        warm = {**WARM_GRID, **{k: tuple(v) for k, v in options.extra.get("warm_grid", {}).items()}}
        settings += [{**base, "p_full": p, "gamma": g, "initial_sensors": list(start)}
                     for start in warm_start_sets(dataset, hpc, fractions, seed=options.seed,
                                                  threads=options.n_jobs)
                     for p in warm["p_full"] for g in warm["gamma"]]
    return settings


@register("adapt-gbrt")
def adapt_gbrt_method(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """Sweep (P_full, γ) and the gate threshold; return the validation-Pareto graphs."""
    options = replace(options, extra=check_params("adapt-gbrt", options.extra))
    cost_model = CostModel.build(dataset.sensors, dataset.cost_weights, dataset.link,
                                 dataset.n_features, hpc.sensors)
    rows = GateRows.of(dataset, hpc, cost_model,
                       options.extra.get("margin_weights", MARGIN_WEIGHTS))
    jobs = [(params, dataset.X_train, dataset.y_train, hpc.oof_proba_train, rows)
            for params in sweep_settings(dataset, hpc, options, cost_model)]
    fitted = parallel_map(_fit_one, jobs, options.n_jobs, options.progress, "adapt-gbrt")
    return gate_sweep("adapt-gbrt", [m for m, _ in fitted], dataset, hpc, cost_model,
                      rows.margin_weights, variants=[v for _, v in fitted])


def variant_name(method: str, model: AdaptGbrtClassifier, cost_model: CostModel
                 ) -> tuple[str, dict[str, float | str]]:
    params: dict[str, float | str] = {
        "p_full": float(model.p_full), "gamma": float(model.gamma),
        "gate_threshold": float(model.gate_threshold),
        "margin_weight": float(model.margin_weight),
    }
    warm = ""
    if model.initial_sensors is not None:
        params["initial_sensors"] = ",".join(cost_model.sensors[i].name
                                             for i in model.initial_sensors)
        warm = f"-k{len(model.initial_sensors)}"
    name = (f"{method}-p{model.p_full:g}-g{model.gamma:g}{warm}-w{model.margin_weight:g}"
            f"-t{model.gate_threshold:+.3f}")
    return name, params


def gate_sweep(method: str, models: Sequence[AdaptGbrtClassifier], dataset: Any, hpc: Any,
               cost_model: CostModel, margin_weights: Sequence[float] = (0.0,), *,
               variants: Sequence[Sequence[Variant]] | None = None) -> list[Graph]:
    """Every (model, margin weight, threshold) walked on validation; the validation front.
    ``variants``: each model's ``gate_variants`` when already walked (in the fit's worker)."""
    if variants is None:
        rows = GateRows.of(dataset, hpc, cost_model, margin_weights)
        variants = [gate_variants(model, rows) for model in models]
    candidates: list[Graph] = []
    for model, walked in zip(models, variants, strict=True):
        for w, tau, metrics in walked:
            variant = model.with_threshold(tau, w)
            name, params = variant_name(method, variant, cost_model)
            graph = one_node_graph(name, method, cost_model, variant, True, params)
            candidates.append(graph.with_validation(metrics))
    return pareto_frontier(candidates)
