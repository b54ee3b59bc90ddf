"""``adaptedge train --method dag``: the policy graph trained by Graph-Reduce, as PolicyExports.

Method-specific options (``MethodOptions.extra``): ``lambdas`` (comma-separated or a list),
``escalation`` ("both" [default], "on" or "off"), ``max_nodes``, ``n_subsets``,
``max_subset_size``, ``classifier`` ("auto" [default], "hgb" or "lr"), ``reduction`` ("ridge", "lr" or "both").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trainer.dag.export import OnnxCache, to_policy_export
from trainer.dag.problem import problem_from
from trainer.dag.sweep import DagSettings, DagSweep, sweep_dag
from trainer.methods import MethodOptions, register
from trainer.policy import PolicyExport

_ESCALATION = {"both": (None, 1.0), "on": (1.0,), "off": (None,)}


def _floats(value: Any) -> tuple[float, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    try:
        out = tuple(float(v) for v in items)
    except ValueError:
        raise ValueError(f"lambdas must be numbers, got {value!r}") from None
    if not out or any(v < 0 for v in out):
        raise ValueError(f"lambdas must be a non-empty list of numbers >= 0, got {value!r}")
    return out


def settings_from(options: MethodOptions) -> DagSettings:
    extra = dict(options.extra)
    base = DagSettings.quick() if options.quick else DagSettings()
    changes: dict[str, Any] = {"seed": options.seed}
    if "lambdas" in extra:
        changes["lambdas"] = _floats(extra.pop("lambdas"))
    if "escalation" in extra:
        mode = str(extra.pop("escalation"))
        if mode not in _ESCALATION:
            raise ValueError(f"escalation must be one of {sorted(_ESCALATION)}, got {mode!r}")
        changes["escalation_prices"] = _ESCALATION[mode]
    if "reduction" in extra:
        mode = str(extra.pop("reduction"))
        if mode not in ("ridge", "lr", "both"):
            raise ValueError(f"reduction must be ridge, lr or both, got {mode!r}")
        changes["reductions"] = ("ridge", "lr") if mode == "both" else (mode,)
    if "classifier" in extra:
        kind = str(extra.pop("classifier"))
        if kind not in ("hgb", "lr", "auto"):
            raise ValueError(f"classifier must be auto, hgb or lr, got {kind!r}")
        changes["classifier"] = kind
    for key in ("max_nodes", "n_subsets", "max_subset_size", "max_iter"):
        if key in extra:
            value = int(extra.pop(key))
            if value < 1:
                raise ValueError(f"{key} must be >= 1, got {value}")
            changes[key] = value
    if extra:
        raise ValueError(f"unknown dag options {sorted(extra)}; known: lambdas, escalation, "
                         "reduction, classifier, max_nodes, n_subsets, max_subset_size, max_iter")
    return replace(base, **changes)


def export_sweep(sweep: DagSweep, *, method: str = "dag") -> list[PolicyExport]:
    cache = OnnxCache(sweep.bank)
    exports = []
    for i, point in enumerate(sweep.points):
        params = point.graph.params
        name = f"{method}-{i:02d}-l{params.get('lambda', 0):g}-e{params.get('escalation_price')}"
        exports.append(to_policy_export(point.graph, cache, name=name, method=method,
                                        validation=point.validation))
    return exports


@register("dag")
def train_dag(dataset: Any, hpc: Any, options: MethodOptions) -> list[PolicyExport]:
    """One PolicyExport per swept (lambda, escalation price), with validation metrics."""
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    settings = settings_from(options)
    with threadpool_limits(limits=1, user_api="openmp"):
        sweep = sweep_dag(problem_from(dataset, hpc), settings)
        return export_sweep(sweep)
