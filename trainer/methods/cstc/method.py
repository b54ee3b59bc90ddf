"""``adaptedge train --method cstc`` and ``--method cscc`` (``--param variant=cronus``).

One model per swept ``lambda``; with ``escalation=on`` (default) each model also yields one
graph per leaf confidence threshold (escalate to the HPC below it). Every graph is walked
on validation by the one float64 walk. Options (``MethodOptions.extra``): ``lambdas``
(comma-separated), ``escalation`` (on/off), ``depth`` (CSTC), ``stages`` (CSCC), ``variant``
(cscc/cronus), ``sweeps``, ``features`` (only ``raw``: linear node classifiers on the sensors'
features; boosted-tree features are not implemented yet).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from adaptedge.trainer.methods.cstc.estimator import train_model
from adaptedge.trainer.methods.cstc.export import to_graph
from adaptedge.trainer.methods.cstc.objective import Variant
from adaptedge.trainer.methods.cstc.optimise import Schedule
from adaptedge.trainer.methods.cstc.structure import Shape, cascade, full_tree
from adaptedge.trainer.methods.dag.problem import problem_from
from adaptedge.trainer.methods.registry import MethodOptions, register
from adaptedge.trainer.policy.graph import Graph
from adaptedge.trainer.policy.walk import walk

LAMBDAS = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003)
QUICK_LAMBDAS = (0.3, 0.03)
THRESHOLDS = (0.6, 0.7, 0.8, 0.9, 0.95)
KNOWN = ("lambdas", "escalation", "depth", "stages", "variant", "sweeps", "features")


def _options(options: MethodOptions, method: str) -> dict[str, Any]:
    extra = dict(options.extra)
    unknown = sorted(set(extra) - set(KNOWN))
    if unknown:
        raise ValueError(f"unknown {method} options {unknown}; known: {', '.join(KNOWN)}")
    out: dict[str, Any] = {}
    raw = extra.get("lambdas", QUICK_LAMBDAS if options.quick else LAMBDAS)
    try:
        out["lambdas"] = tuple(float(v) for v in (raw.split(",") if isinstance(raw, str)
                                                   else raw))
    except ValueError:
        raise ValueError(f"lambdas must be numbers, got {raw!r}") from None
    if not out["lambdas"] or min(out["lambdas"]) < 0:
        raise ValueError(f"lambdas must be a non-empty list of numbers >= 0, got {raw!r}")
    out["escalation"] = str(extra.get("escalation", "on"))
    if out["escalation"] not in ("on", "off"):
        raise ValueError(f"escalation must be on or off, got {out['escalation']!r}")
    features = str(extra.get("features", "raw"))
    if features != "raw":
        raise ValueError(f"features={features!r} is not available; use features=raw "
                         "(boosted-tree features are not implemented yet)")
    out["variant"] = str(extra.get("variant", "cscc"))
    if out["variant"] not in ("cscc", "cronus"):
        raise ValueError(f"variant must be cscc or cronus, got {out['variant']!r}")
    for key, default in (("depth", 3), ("stages", 4), ("sweeps", 1 if options.quick else 2)):
        out[key] = int(extra.get(key, default))
        if out[key] < 1:
            raise ValueError(f"{key} must be >= 1, got {out[key]}")
    return out


def sweep(dataset: Any, hpc: Any, options: MethodOptions, shape: Shape, variant: Variant,
          method: str, opts: dict[str, Any]) -> list[Graph]:
    """Train one model per lambda; one graph per (lambda, escalation threshold)."""
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    # one BLAS thread: the node solves multiply [n, d] x [d, m] with m <= classes, where a
    # second OpenBLAS thread on a shared 2-core machine spins (gas: ~11 ms a product, not ~1)
    with threadpool_limits(limits=1, user_api="blas"):
        return _sweep(dataset, hpc, shape, variant, method, opts)


def _sweep(dataset: Any, hpc: Any, shape: Shape, variant: Variant, method: str,
           opts: dict[str, Any]) -> list[Graph]:
    problem = problem_from(dataset, hpc)
    names = problem.sensor_names(problem.all_sensors)
    columns = tuple(s.features for s in problem.sensors)
    table = problem.cost_table()
    val = problem.splits["val"]
    thresholds = (None, *THRESHOLDS) if opts["escalation"] == "on" else (None,)
    graphs: list[Graph] = []
    for lam in opts["lambdas"]:
        model = train_model(
            dataset.X_train, dataset.y_train, len(dataset.classes), shape, groups=columns,
            costs=list(problem.sensor_costs), lam=lam, rho=1e-3, variant=variant,
            schedule=Schedule(sweeps=opts["sweeps"]), val=(dataset.X_val, dataset.y_val))
        for t in thresholds:
            params: dict[str, float | str] = {"lambda": lam, "threshold": t or "none"}
            graph = to_graph(model, names, columns, t, params)
            metrics = walk(graph, val.X, val.hpc_proba, table).metrics(val.y)
            name = f"{method}-{len(graphs):02d}-l{lam:g}-t{t or 'none'}"
            graphs.append(replace(graph.with_validation(metrics), name=name, method=method))
    return graphs


@register("cstc")
def train_cstc(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    opts = _options(options, "cstc")
    return sweep(dataset, hpc, options, full_tree(opts["depth"]), "cstc", "cstc", opts)


@register("cscc")
def train_cscc(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    opts = _options(options, "cscc")
    variant: Variant = "cronus" if opts["variant"] == "cronus" else "cscc"
    return sweep(dataset, hpc, options, cascade(opts["stages"]), variant, variant, opts)
