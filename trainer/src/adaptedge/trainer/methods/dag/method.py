"""``adaptedge train --method dag``: the policy graph trained by Graph-Reduce.

Also ``--method static`` (the static skyline: one node per sensor subset, stop only) and
``--method cascade`` (sensors in greedy order, stop or read the next, by Graph-Reduce).

Method-specific options (``MethodOptions.extra``) are declared in
``trainer.methods.params.DAG_PARAMS``: ``lambdas``, ``escalation``, ``reduction``,
``policy`` (``paper``: the paper's filter tree, ``trainer.methods.dag.filter_tree``),
``policy_degree``, ``classifier``, ``lattice``, ``max_nodes``, ``max_exhaustive``, ``n_subsets``, ``max_subset_size``,
``max_iter``, ``subset_trees``, ``masked_trees``, ``masked_replicas``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from adaptedge.trainer.methods.dag.baselines import cascade_points, static_points, static_sets
from adaptedge.trainer.methods.dag.problem import problem_from
from adaptedge.trainer.methods.dag.subsets import greedy_order, lattice_scorer
from adaptedge.trainer.methods.dag.sweep import (
    DagSettings,
    DagSweep,
    choose_bank,
    sweep_dag,
)
from adaptedge.trainer.methods.params import check_params
from adaptedge.trainer.methods.registry import MethodOptions, register
from adaptedge.trainer.policy.frontier import Front, pareto_frontier
from adaptedge.trainer.policy.graph import Graph

_ESCALATION = {"both": (None, 1.0), "on": (1.0,), "off": (None,)}
_INT_KEYS = ("max_nodes", "max_exhaustive", "n_subsets", "max_subset_size", "max_iter",
             "subset_trees", "masked_trees", "masked_replicas")


def settings_from(options: MethodOptions) -> DagSettings:
    """The sweep settings; ``options.extra`` is checked against ``trainer.methods.params``."""
    extra = check_params("dag", options.extra)
    base = DagSettings.quick() if options.quick else DagSettings()
    changes: dict[str, Any] = {"seed": options.seed}
    if "lambdas" in extra:
        changes["lambdas"] = extra["lambdas"]
    if "escalation" in extra:
        changes["escalation_prices"] = _ESCALATION[extra["escalation"]]
    if "reduction" in extra:
        mode = extra["reduction"]
        changes["reductions"] = ("ridge", "lr") if mode == "both" else (mode,)
    if extra.get("policy") == "paper":
        changes["reductions"] = ("paper",)
    if "policy_degree" in extra:
        changes["policy_degree"] = extra["policy_degree"]
    if "classifier" in extra:
        changes["classifier"] = extra["classifier"]
    if "lattice" in extra:
        changes["lattice"] = extra["lattice"]
    changes.update({key: extra[key] for key in _INT_KEYS if key in extra})
    return replace(base, **changes)


def export_points(points: list[Graph], method: str) -> list[Graph]:
    """The graphs named for the bundle (index, lambda, escalation price) and their method."""
    out = []
    for i, point in enumerate(points):
        params = point.params
        if "lambda" in params:
            name = f"{method}-{i:02d}-l{params['lambda']:g}-e{params.get('escalation_price')}"
        else:
            name = f"{method}-{i:02d}"
        out.append(replace(point, name=name, method=method))
    return out


def export_sweep(sweep: DagSweep, *, method: str = "dag") -> list[Graph]:
    return export_points(sweep.points, method)


@register("dag")
def train_dag(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """One graph per swept (lambda, escalation price), with validation metrics."""
    from threadpoolctl import threadpool_limits

    settings = settings_from(options)
    with threadpool_limits(limits=1, user_api="openmp"):
        sweep = sweep_dag(problem_from(dataset, hpc), settings, progress=options.progress,
                          n_jobs=options.n_jobs)
        return export_sweep(sweep)


@register("static")
def train_static(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """The static skyline: the validation-frontier sensor subsets, one stop-only node each."""
    settings = settings_from(options)
    problem = problem_from(dataset, hpc)
    bank = choose_bank(problem, settings, n_jobs=options.n_jobs)
    scorer = lattice_scorer(problem, settings.seed, threads=options.n_jobs)
    sets = static_sets(bank, scorer, max_exhaustive=settings.max_exhaustive)
    bank.prefetch(sets, options.n_jobs, out_of_fold=False)  # the sets' models side by side
    points = static_points(bank, sets)
    return Front(export_points(pareto_frontier(points), "static"), len(points))


@register("cascade")
def train_cascade(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """A fixed-order cascade (greedy sensor order), one policy per lambda."""
    settings = settings_from(options)
    problem = problem_from(dataset, hpc)
    bank = choose_bank(problem, settings, n_jobs=options.n_jobs)
    order = greedy_order(problem, lattice_scorer(problem, settings.seed, options.n_jobs))
    reduction = "ridge" if "ridge" in settings.reductions else settings.reductions[0]
    points = cascade_points(bank, order, settings.lambdas, reduction, n_jobs=options.n_jobs)
    return export_points(points, "cascade")
