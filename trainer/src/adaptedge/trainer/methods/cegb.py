"""``--method cegb``: LightGBM's Cost-Efficient Gradient Boosting (Peter et al., NeurIPS 2017)
as a peer at full strength, with escalation to the HPC like the other gate methods.

The sweep fits one booster per CEGB price: plain LightGBM (no penalty), each ``coupled`` price
(a feature is paid once per model) and each ``lazy`` price (paid once per row whose path first
uses it); every fit keeps its best validation round (``cegb_model.fit_cegb``). Each booster
then becomes one-node graphs (``policy.one_node``): the node reads the sensors of every
feature the kept trees split on, answers with the booster, and escalates when its logit margin
(its confidence) is below a cut set at the ``escalate`` quantiles of its validation margins
(0: never).
Every candidate is scored by the one walk on validation; the caller keeps the validation front.
Departures from the paper are declared in ``docs/peers.md``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from adaptedge.trainer.methods.cegb_model import (
    BoostSettings,
    CegbModel,
    Penalties,
    fit_cegb,
    import_lightgbm,
)
from adaptedge.trainer.methods.gating import CostModel, parallel_map
from adaptedge.trainer.methods.labels import class_indices
from adaptedge.trainer.methods.params import check_params
from adaptedge.trainer.methods.registry import MethodOptions, register
from adaptedge.trainer.policy.frontier import pareto_frontier
from adaptedge.trainer.policy.graph import Graph
from adaptedge.trainer.policy.one_node import named, one_node_graph, validated

import_lightgbm()  # on import (``get_method("cegb")``): no HPC fit before the install hint

COUPLED = tuple(float(c) for c in np.geomspace(1e-4, 1e-1, 13))
"""Coupled prices per training row, in mean-sensor-cost units (x rows = LightGBM's units)."""
LAZY = tuple(float(c) for c in np.geomspace(1e-4, 1e-1, 7))
ESCALATE = (0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)
"""Escalation rates on validation whose confidence quantiles become the cuts."""
QUICK_COUPLED, QUICK_LAZY, QUICK_ESCALATE = (1e-3, 1e-1), (1e-3,), (0.0, 0.05, 0.2)
QUICK_SETTINGS = BoostSettings(n_rounds=60, patience=20)


def _fit(job: tuple[Any, ...]) -> CegbModel:
    X, y, X_val, y_val, n_classes, fs, costs, penalties, settings, seed = job
    return fit_cegb(X, y, X_val, y_val, n_classes, fs, costs, penalties, settings, seed)


def settings_of(extra: dict[str, Any], quick: bool) -> BoostSettings:
    """The shared LightGBM knobs: defaults, the quick sweep's, then ``--param`` values."""
    base = QUICK_SETTINGS if quick else BoostSettings()
    keys = ("n_rounds", "patience", "learning_rate", "num_leaves", "min_data_in_leaf",
            "penalty_split", "iteration")
    return replace(base, **{k: extra[k] for k in keys if k in extra})


def penalties_of(extra: dict[str, Any], quick: bool) -> list[Penalties]:
    """Plain LightGBM, then each coupled price, then each lazy price (one fit each)."""
    coupled = tuple(extra.get("coupled", QUICK_COUPLED if quick else COUPLED))
    lazy = tuple(extra.get("lazy", QUICK_LAZY if quick else LAZY))
    out = [Penalties(0.0, 0.0)]
    out += [Penalties(float(c), 0.0) for c in coupled if c > 0]
    out += [Penalties(0.0, float(c)) for c in lazy if c > 0]
    return out


def quantile_cut(confidence: np.ndarray[Any, Any], q: float) -> float:
    """The cut below which the ``round(q * n)`` least confident of ``n`` validation rows
    fall: midway between two adjacent confidences, so that float32 noise in the exported
    head cannot move a row across it (0: escalate nothing). The margins are exact, so this
    only keeps ties off the cut."""
    c = np.sort(np.asarray(confidence, np.float64))
    k = round(q * c.size)
    if k <= 0 or not c.size:
        return 0.0
    if k >= c.size:
        return float(c[-1]) + 1.0
    return float((c[k - 1] + c[k]) / 2)


def escalation_graphs(model: CegbModel, fractions: tuple[float, ...], dataset: Any, hpc: Any,
                      cm: CostModel) -> list[Graph]:
    """``model`` at the cuts escalating each fraction of the validation rows, validated."""
    z_val = model.decision_logits(dataset.X_val)
    proba_val = model.predict_proba(dataset.X_val)
    confidence = model.confidence(z_val)
    out = []
    for q in sorted(set(fractions)):
        variant = model.with_threshold(quantile_cut(confidence, q))
        params: dict[str, float | str] = {
            "coupled": model.penalties.coupled, "lazy": model.penalties.lazy,
            "rounds": float(model.rounds), "escalate": float(q),
            "threshold": variant.threshold}
        graph = one_node_graph(named("cegb", params), "cegb", cm, variant, True, params)
        out.append(validated(graph, dataset, hpc, cm, proba_val,
                             variant.gate_from_logits(z_val)))
    return out


@register("cegb")
def cegb_method(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    extra = check_params("cegb", options.extra)
    cm = CostModel.build(dataset.sensors, dataset.cost_weights, dataset.link,
                         dataset.n_features, hpc.sensors)
    _, y = class_indices(dataset.y_train, hpc.oof_proba_train)
    _, y_val = class_indices(dataset.y_val, hpc.proba_val)
    n_classes = int(np.asarray(hpc.proba_val).shape[1])
    settings = settings_of(extra, options.quick)
    jobs = [(dataset.X_train, y, dataset.X_val, y_val, n_classes, cm.feature_sensor,
             cm.sensor_costs, p, settings, options.seed)
            for p in penalties_of(extra, options.quick)]
    models = parallel_map(_fit, jobs, options.n_jobs, options.progress, "cegb")
    fractions = tuple(extra.get("escalate", QUICK_ESCALATE if options.quick else ESCALATE))
    out: list[Graph] = []
    for model in models:
        if model.sensors_bought_.any():
            out += escalation_graphs(model, fractions, dataset, hpc, cm)
    return pareto_frontier(out)
