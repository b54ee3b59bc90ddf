"""``adaptedge train --method auto``: every method that applies to the data, on one HPC, merged
into one validation front.

The HPC and its out-of-fold training probabilities are fitted once (by ``train``) and handed
to every method. Which methods apply, and the order they run in (the strong and cheap first):

- ``confidence``, ``greedy-miser``, ``l1``, ``adapt-gbrt``, ``cstc``: any classification data;
- ``dag``: two or more sensors (a one-sensor lattice has nothing to order);
- ``cegb`` (LightGBM's cost-efficient gradient boosting): when registered and ``lightgbm``
  imports;
- ``adapt-lin``: only when asked (``--param methods=...,adapt-lin``): 240 s on letter-binary
  and none of its points reached the merged front of a ``--quick`` run there.

Not swept: ``polydom`` and the ``greedy*`` family (per-item budgets: a different bundle kind),
``static`` and ``cascade`` (the DAG paper's own baselines, which ``dag`` improves on) and
``cscc`` (CSTC's cascade form; ``cstc`` is swept).

``--time-budget SECONDS`` (``time_budget``; default ``default_budget``): before it starts, the
plan keeps the methods whose estimated times (``estimate_seconds``: per-method rates measured
on letter-binary, scaled by rows x features) fit in order; a method left out, and any method
once the measured time has passed the budget, is skipped with a progress line. The plan
depends on the data's size only, so the same inputs give the same bundle; a run that overruns
its estimates skips later methods (and may then differ). Each point keeps its method
(``Graph.method``; the manifest's ``OperatingPoint.method``), and the merged front is the
points no point of any method beats on validation.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from adaptedge.trainer.errors import ParamError
from adaptedge.trainer.methods.params import check_params
from adaptedge.trainer.methods.registry import METHOD_MODULES, MethodOptions, get_method, register
from adaptedge.trainer.policy.frontier import Front, pareto_frontier
from adaptedge.trainer.policy.graph import Graph
from adaptedge.trainer.progress import clock

ORDER = ("confidence", "greedy-miser", "l1", "adapt-gbrt", "dag", "cegb", "cstc", "adapt-lin")
"""The methods auto may run, in the order it runs them."""
DEFAULT = tuple(m for m in ORDER if m != "adapt-lin")
"""The methods auto considers unless ``--param methods=`` names others."""

SECONDS_LETTER_BINARY: Mapping[str, tuple[float, float]] = {
    "confidence": (35.0, 6.0), "greedy-miser": (130.0, 4.0), "l1": (6.0, 2.0),
    "adapt-gbrt": (200.0, 15.0), "dag": (150.0, 20.0), "cegb": (100.0, 5.0),
    "cstc": (90.0, 10.0), "adapt-lin": (240.0, 20.0),
}
"""(full, --quick) seconds of each method on letter-binary (12,000 training rows x 16
features, one process), rounded up from measured runs; ``estimate_seconds`` scales them."""
LETTER_BINARY_SIZE = 12_000 * 16


@dataclass(frozen=True)
class Plan:
    """The methods to run (with estimated seconds) and those skipped (with why)."""

    run: tuple[tuple[str, float], ...]
    skipped: tuple[tuple[str, str], ...]
    budget: float


def estimate_seconds(method: str, n_rows: int, n_features: int, n_classes: int,
                     quick: bool) -> float:
    """A rough one-process time of ``method``: its letter-binary time scaled by rows x
    features (and by classes beyond two)."""
    full, short = SECONDS_LETTER_BINARY[method]
    scale = n_rows * n_features / LETTER_BINARY_SIZE * max(1.0, n_classes / 2)
    return (short if quick else full) * max(scale, 0.02)


def available(method: str) -> str | None:
    """Why ``method`` cannot run here (``None``: it can)."""
    if method not in METHOD_MODULES:
        return "not registered in trainer.methods.registry"
    if method == "cegb":
        try:
            importlib.import_module("lightgbm")
        except ImportError:
            return "lightgbm is not installed (pip install lightgbm)"
    return None


def applies(method: str, dataset: Any) -> str | None:
    """Why ``method`` does not apply to ``dataset`` (``None``: it does)."""
    if method == "dag" and len(dataset.sensors) < 2:
        return "one sensor: nothing to order"
    return available(method)


def default_budget(dataset: Any, quick: bool) -> float:
    """Seconds: 1.5 x the estimates of every applicable ``DEFAULT`` method, at least
    60 s (a minute of slack on small data)."""
    total = sum(_estimate(m, dataset, quick) for m in DEFAULT if applies(m, dataset) is None)
    return max(60.0, 1.5 * total)


def _estimate(method: str, dataset: Any, quick: bool) -> float:
    return estimate_seconds(method, len(dataset.y_train), dataset.n_features,
                            len(dataset.classes), quick)


def plan(dataset: Any, quick: bool, budget: float | None,
         methods: Sequence[str] | None = None) -> Plan:
    """The methods of ``methods`` (default ``DEFAULT``) that apply and whose one-process
    estimates fit ``budget`` (default ``default_budget``) in turn (the same plan for any
    ``--jobs``, so the bundle is too)."""
    budget = default_budget(dataset, quick) if budget is None else budget
    run: list[tuple[str, float]] = []
    skipped: list[tuple[str, str]] = []
    used = 0.0
    for method in methods or DEFAULT:
        if (why := applies(method, dataset)) is not None:
            skipped.append((method, why))
            continue
        seconds = _estimate(method, dataset, quick)
        if used + seconds > budget:
            skipped.append((method, f"estimated {seconds:.0f} s; {budget - used:.0f} s of the "
                                    f"{budget:.0f} s time budget left"))
            continue
        run.append((method, seconds))
        used += seconds
    return Plan(tuple(run), tuple(skipped), budget)


def merge(per_method: Mapping[str, Sequence[Graph]]) -> Front[Graph]:
    """One validation front of every method's candidates; each keeps its ``method``, names
    are made unique by the method's prefix. ``swept`` counts every method's candidates."""
    graphs: list[Graph] = []
    seen: set[str] = set()
    swept = 0
    for method, candidates in per_method.items():
        swept += candidates.swept if isinstance(candidates, Front) else len(candidates)
        for g in candidates:
            g = g if g.method else replace(g, method=method)
            name = g.name if g.name.startswith(method) else f"{method}-{g.name}"
            while name in seen:
                name += "'"
            seen.add(name)
            graphs.append(replace(g, name=name) if name != g.name else g)
    return Front(pareto_frontier(graphs), swept)


def _say(text: str, enabled: bool) -> None:
    if enabled:
        print(f"[adaptedge] auto: {text}", file=sys.stderr, flush=True)


@dataclass
class AutoRun:
    """What ``run_methods`` did: each method's candidates and seconds, and the plan."""

    plan: Plan
    candidates: dict[str, list[Graph]]
    seconds: dict[str, float]


def run_methods(dataset: Any, hpc: Any, options: MethodOptions) -> AutoRun:
    """Every planned method on the one HPC, one progress line as each starts and ends."""
    budget = options.extra.get("time_budget")
    chosen = options.extra.get("methods")
    names = None if chosen is None else [m.strip() for m in str(chosen).split(",") if m.strip()]
    if names is not None and (unknown := [m for m in names if m not in ORDER]):
        raise ParamError(f"auto cannot sweep {unknown}; methods must be among "
                         f"{', '.join(ORDER)}")
    p = plan(dataset, options.quick, None if budget is None else float(budget), names)
    for method, why in p.skipped:
        _say(f"skip {method}: {why}", options.progress)
    per_params: Mapping[str, Mapping[str, Any]] = options.extra.get("params", {})
    done = AutoRun(p, {}, {})
    started = time.monotonic()
    for i, (method, estimate) in enumerate(p.run):
        elapsed = time.monotonic() - started
        if elapsed > p.budget:
            _say(f"skip {method}: the {p.budget:.0f} s time budget is spent "
                 f"({clock(elapsed)} elapsed)", options.progress)
            continue
        left = sum(s for _, s in p.run[i:])
        _say(f"method {i + 1}/{len(p.run)} {method} (estimated {clock(estimate)}), "
             f"{clock(elapsed)} elapsed, ETA {clock(left)}", options.progress)
        own = replace(options, extra=check_params(method, per_params.get(method, {})))
        done.candidates[method] = get_method(method)(dataset, hpc, own)
        done.seconds[method] = time.monotonic() - started - elapsed
        _say(f"{method} done: {len(done.candidates[method])} candidates in "
             f"{clock(done.seconds[method])}, {clock(time.monotonic() - started)} elapsed",
             options.progress)
    return done


@register("auto")
def auto_method(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """``run_methods``, merged into one validation front; the bundle's metadata records what
    ran and what was skipped (never the seconds: the bundle id depends on content only)."""
    done = run_methods(dataset, hpc, options)
    front = merge(done.candidates)
    front.metadata = {"auto": {"ran": list(done.candidates), "skipped": dict(done.plan.skipped),
                               "time_budget": round(done.plan.budget, 1)}}
    return front
