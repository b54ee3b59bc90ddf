"""``adaptedge train --method cstc`` and ``--method cscc`` (``--param variant=cronus``).

One model per swept ``lambda``; with ``escalation=on`` (default) each model also yields one
graph per leaf confidence threshold (escalate to the HPC below it). Every graph is walked
on validation by the one float64 walk. Options (``MethodOptions.extra``): ``lambdas``
(comma-separated), ``escalation`` (on/off), ``depth`` (CSTC), ``stages`` (CSCC), ``variant``
(cscc/cronus), ``sweeps``, ``features``: ``raw`` (linear node classifiers on the sensors'
features) or ``boosted`` (linear node classifiers on the outputs of pre-trained boosted
regression trees, ``boosted``: ``trees`` per boosting run, ``tree_depth``, ``tree_rate``,
``tree_gammas`` one run per Greedy Miser penalty, ``tree_cost`` one tree evaluation's energy,
latency and feature count as a fraction of the mean sensor's, charged per node visit as the
node's ``compute``; training prices a tree by that compute's scalar), ``loss`` (``squared``,
the default: the paper's squared loss for two classes; ``logistic``) and ``init``
(``lookahead``, the default, or ``paper``: ``estimator.train_model``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from threadpoolctl import threadpool_limits

from adaptedge.protocol.costs import compute_cost
from adaptedge.trainer.methods.cstc.boosted import TreeSettings, fit_boosted
from adaptedge.trainer.methods.cstc.estimator import _targets, train_model
from adaptedge.trainer.methods.cstc.export import to_graph
from adaptedge.trainer.methods.cstc.objective import Variant
from adaptedge.trainer.methods.cstc.optimise import Schedule
from adaptedge.trainer.methods.cstc.structure import Shape, cascade, full_tree
from adaptedge.trainer.methods.dag.problem import problem_from
from adaptedge.trainer.methods.registry import MethodOptions, register
from adaptedge.trainer.methods.tree_compute import tree_compute
from adaptedge.trainer.parallel import parallel_map
from adaptedge.trainer.policy.graph import Graph
from adaptedge.trainer.policy.walk import walk
from adaptedge.trainer.progress import Stages

LAMBDAS = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003)
QUICK_LAMBDAS = (0.3, 0.03)
BOOSTED_LAMBDAS = (0.03, 0.01, 0.003, 0.001, 0.0003)
"""A tree's weight pays for every sensor the tree reads: smaller lambdas than raw columns."""
QUICK_BOOSTED_LAMBDAS = (0.01, 0.001)
THRESHOLDS = (0.6, 0.7, 0.8, 0.9, 0.95)
KNOWN = ("lambdas", "escalation", "depth", "stages", "variant", "sweeps", "features", "trees",
         "tree_depth", "tree_rate", "tree_gammas", "tree_cost", "loss", "init")
TREES = TreeSettings(trees=100, depth=5, learning_rate=0.3, gammas=(3e-3, 1e-3, 2e-4))
"""Default boosted features: three Greedy Miser runs of 100 depth-5 trees (few to many sensors)."""
QUICK_TREES = TreeSettings(trees=20, depth=4, learning_rate=0.3, gammas=(1e-3, 0.0))
TREE_COST = 0.01


def _options(options: MethodOptions, method: str) -> dict[str, Any]:
    extra = dict(options.extra)
    unknown = sorted(set(extra) - set(KNOWN))
    if unknown:
        raise ValueError(f"unknown {method} options {unknown}; known: {', '.join(KNOWN)}")
    out: dict[str, Any] = {}
    boosted = extra.get("features") == "boosted"
    default = ((QUICK_BOOSTED_LAMBDAS if options.quick else BOOSTED_LAMBDAS) if boosted
               else QUICK_LAMBDAS if options.quick else LAMBDAS)
    raw = extra.get("lambdas", default)
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
    out["features"] = str(extra.get("features", "raw"))
    if out["features"] not in ("raw", "boosted"):
        raise ValueError(f"features must be raw or boosted, got {out['features']!r}")
    out["trees"] = _tree_options(extra, QUICK_TREES if options.quick else TREES)
    out["tree_cost"] = float(extra.get("tree_cost", TREE_COST))
    if out["tree_cost"] < 0:
        raise ValueError(f"tree_cost must be >= 0, got {out['tree_cost']}")
    out["loss"] = str(extra.get("loss", "squared"))
    if out["loss"] not in ("squared", "logistic"):
        raise ValueError(f"loss must be squared or logistic, got {out['loss']!r}")
    out["init"] = str(extra.get("init", "lookahead"))
    if out["init"] not in ("lookahead", "paper"):
        raise ValueError(f"init must be lookahead or paper, got {out['init']!r}")
    out["variant"] = str(extra.get("variant", "cscc"))
    if out["variant"] not in ("cscc", "cronus"):
        raise ValueError(f"variant must be cscc or cronus, got {out['variant']!r}")
    for key, fallback in (("depth", 3), ("stages", 4), ("sweeps", 1 if options.quick else 2)):
        out[key] = int(extra.get(key, fallback))
        if out[key] < 1:
            raise ValueError(f"{key} must be >= 1, got {out[key]}")
    return out


def _tree_options(extra: dict[str, Any], default: TreeSettings) -> TreeSettings:
    try:
        raw = extra.get("tree_gammas", default.gammas)
        gammas = tuple(float(v) for v in (raw.split(",") if isinstance(raw, str) else raw))
        settings = TreeSettings(trees=int(extra.get("trees", default.trees)),
                                depth=int(extra.get("tree_depth", default.depth)),
                                learning_rate=float(extra.get("tree_rate", default.learning_rate)),
                                gammas=gammas)
    except ValueError:
        raise ValueError("trees and tree_depth must be integers, tree_rate a number and "
                         "tree_gammas comma-separated numbers") from None
    return settings.checked()


def sweep(dataset: Any, hpc: Any, options: MethodOptions, shape: Shape, variant: Variant,
          method: str, opts: dict[str, Any]) -> list[Graph]:
    """Train one model per lambda (on ``options.n_jobs`` processes: the models do not depend
    on each other, so they are the same for any ``n_jobs``); one graph per (lambda,
    escalation threshold). One BLAS thread: the node solves multiply [n, d] x [d, m] with
    m <= classes, where a second OpenBLAS thread on a shared 2-core machine spins (gas:
    ~11 ms a product, not ~1)."""
    with threadpool_limits(limits=1, user_api="blas"):
        return _sweep(dataset, hpc, shape, variant, method, opts, options)


def _fit_lambda(job: tuple[dict[str, Any], Any, Any]) -> Any:
    """One lambda's ``train_model`` (in a worker: one BLAS thread there too)."""
    kwargs, X, y = job
    with threadpool_limits(limits=1, user_api="blas"):
        return train_model(X, y, **kwargs)


def _sweep(dataset: Any, hpc: Any, shape: Shape, variant: Variant, method: str,
           opts: dict[str, Any], options: MethodOptions) -> list[Graph]:
    progress = options.progress
    problem = problem_from(dataset, hpc)
    names = problem.sensor_names(problem.all_sensors)
    columns = tuple(s.features for s in problem.sensors)
    table = problem.cost_table()
    val = problem.splits["val"]
    thresholds = (None, *THRESHOLDS) if opts["escalation"] == "on" else (None,)
    graphs: list[Graph] = []
    boosted = opts["features"] == "boosted"
    stages = Stages(method, ("boosted features", "sweep") if boosted else ("sweep",), progress)
    if boosted:
        stages.start("boosted features")
    features = fit_boosted(dataset.X_train, _targets(dataset.y_train, len(dataset.classes)),
                           columns, opts["trees"], list(problem.sensor_costs)) if boosted else None
    compute = tree_compute(dataset.sensors, opts["tree_cost"]) if boosted else None
    # training prices a tree as the walkers will: its scalar over the mean sensor's (a
    # money-only scalar, e.g. thyroid's, makes compute free)
    mean_sensor = float(problem.sensor_costs.mean())
    tree_cost = (compute_cost(compute, dataset.cost_weights).scalar / mean_sensor
                 if compute is not None and mean_sensor > 0 else opts["tree_cost"])
    stages.start("sweep")
    shared = dict(n_classes=len(dataset.classes), shape=shape, groups=columns,
                  costs=list(problem.sensor_costs), rho=1e-3, variant=variant,
                  schedule=Schedule(sweeps=opts["sweeps"]), val=(dataset.X_val, dataset.y_val),
                  features=features, tree_cost=tree_cost, loss=opts["loss"], init=opts["init"])
    jobs = [({**shared, "lam": lam}, dataset.X_train, dataset.y_train)
            for lam in opts["lambdas"]]
    models = parallel_map(_fit_lambda, jobs, options.n_jobs, progress,
                          f"{method} sweep (lambda)")
    for lam, model in zip(opts["lambdas"], models, strict=True):
        for t in thresholds:
            params: dict[str, float | str] = {"lambda": lam, "threshold": t or "none"}
            if boosted:
                params["features"] = "boosted"
            graph = to_graph(model, names, columns, t, params, compute)
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
