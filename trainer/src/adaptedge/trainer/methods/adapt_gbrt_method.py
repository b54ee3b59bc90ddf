"""``adaptedge train --method adapt-gbrt``: the ADAPT-GBRT sweep as one-node graphs.

Sweeps (P_full, γ) from an empty bought set (the paper) and from each warm-start set
(``trainer.methods.warm_start``), and, per fitted model, the gate threshold and the margin weight
(both post-hoc, on validation); returns the validation-Pareto graphs.
``extra={"warm_start": False}`` gives the paper's sweep alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from adaptedge.trainer.methods.adapt_gbrt import AdaptGbrtClassifier, gate_score_from
from adaptedge.trainer.methods.cart import quantize
from adaptedge.trainer.methods.gating import CostModel, parallel_map, proba
from adaptedge.trainer.methods.params import check_params
from adaptedge.trainer.methods.registry import MethodOptions, register
from adaptedge.trainer.policy.frontier import pareto_frontier
from adaptedge.trainer.policy.graph import FloatArray, Graph
from adaptedge.trainer.policy.one_node import one_node_graph, validated

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
"""A fit's LPC logits and raw gate ``g`` on the validation rows (what ``gate_sweep`` needs)."""


def _fit_one(job: tuple[dict[str, Any], Any, Any, Any, Any]
             ) -> tuple[AdaptGbrtClassifier, ValOutputs]:
    """Fit one setting, and walk its trees on the validation rows in the same worker."""
    params, X, y, P, X_val = job
    model = AdaptGbrtClassifier(**params).fit(X, y, P)
    return model, val_outputs(model, X_val)


def val_outputs(model: AdaptGbrtClassifier, X_val: Any) -> ValOutputs:
    """``(decision_logits(X_val), gate_raw(X_val))``: every tree walked once per fit."""
    return model.decision_logits(X_val), model.gate_raw(X_val)


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
                     for start in warm_start_sets(dataset, hpc, fractions, seed=options.seed)
                     for p in warm["p_full"] for g in warm["gamma"]]
    return settings


@register("adapt-gbrt")
def adapt_gbrt_method(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """Sweep (P_full, γ) and the gate threshold; return the validation-Pareto graphs."""
    options = replace(options, extra=check_params("adapt-gbrt", options.extra))
    cost_model = CostModel.build(dataset.sensors, dataset.cost_weights, dataset.link,
                                 dataset.n_features, hpc.sensors)
    jobs = [(params, dataset.X_train, dataset.y_train, hpc.oof_proba_train, dataset.X_val)
            for params in sweep_settings(dataset, hpc, options, cost_model)]
    fitted = parallel_map(_fit_one, jobs, options.n_jobs, options.progress, "adapt-gbrt")
    weights = tuple(options.extra.get("margin_weights", MARGIN_WEIGHTS))
    return gate_sweep("adapt-gbrt", [m for m, _ in fitted], dataset, hpc, cost_model, weights,
                      progress=options.progress, outputs=[o for _, o in fitted])


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
               progress: bool = False, outputs: Sequence[ValOutputs] | None = None
               ) -> list[Graph]:
    """Every (model, margin weight, threshold) walked on validation; the validation front.
    ``outputs``: each model's ``val_outputs`` when already computed (in the fit's worker)."""
    from adaptedge.trainer.progress import track

    candidates: list[Graph] = []
    for i, model in enumerate(track(models, f"{method} gate thresholds", len(models),
                                    progress)):
        if not model.sensors_bought_.any():
            continue  # a node that reads nothing: always-escalate is the HPC itself
        # every tree runs once per model; the variants below only shift and compare
        logits, g_val = (val_outputs(model, dataset.X_val) if outputs is None
                         else outputs[i])
        proba_val = proba(logits, model.n_classes_)
        margin_val = model.lpc_margin(dataset.X_val, logits)
        for w in margin_weights:
            raw = gate_score_from(g_val, margin_val, 0.0, w)
            for tau in threshold_candidates(raw):
                variant = model.with_threshold(tau, w)
                score = gate_score_from(g_val, margin_val, variant.gate_threshold,
                                        variant.margin_weight)
                name, params = variant_name(method, variant, cost_model)
                graph = one_node_graph(name, method, cost_model, variant, True, params)
                candidates.append(validated(graph, dataset, hpc, cost_model, proba_val, score))
    return pareto_frontier(candidates)
