"""The registry of training methods: ``adaptedge train --method NAME`` looks names up here.

A method module registers a function with ``@register("name")``. The function receives the
dataset, the fitted HPC and the options, and returns the candidate policies of its sweep
(``trainer.policy.graph.Graph``s with validation metrics); the caller keeps the validation
frontier and exports the bundle. Modules are imported lazily by name so that one method's dependencies
never load for another.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adaptedge.trainer.policy.graph import Graph

# method name -> module that registers it
METHOD_MODULES: dict[str, str] = {
    "adapt-gbrt": "adaptedge.trainer.methods.adapt_gbrt_method",
    "adapt-lin": "adaptedge.trainer.methods.adapt_lin",
    "l1": "adaptedge.trainer.methods.baselines",
    "greedy-miser": "adaptedge.trainer.methods.greedy_miser",
    "confidence": "adaptedge.trainer.methods.confidence_cascade",
    "dag": "adaptedge.trainer.methods.dag.method",
    "static": "adaptedge.trainer.methods.dag.method",
    "cascade": "adaptedge.trainer.methods.dag.method",
    "polydom": "adaptedge.trainer.methods.polydom.method",
    "greedy": "adaptedge.trainer.methods.polydom.method",
    "greedy-acc": "adaptedge.trainer.methods.polydom.method",
    "greedy-cost": "adaptedge.trainer.methods.polydom.method",
    "cstc": "adaptedge.trainer.methods.cstc.method",
    "cscc": "adaptedge.trainer.methods.cscc",
    "cegb": "adaptedge.trainer.methods.cegb",
    "auto": "adaptedge.trainer.methods.auto",
}
INDEXED_METHODS = ("polydom", "greedy", "greedy-acc", "greedy-cost")
"""Methods whose bundles carry a ``budget_index`` (per-decision budgets on the device)."""
LEARNS_MISSING = frozenset({"adapt-gbrt", "greedy-miser", "dag"})
"""Methods that learn from missing cells (NaN: a sensor not measured on that row) as they are:
the histogram trees send NaN to the right (with the largest values; ``trainer.methods.cart``)
and the DAG's boosted node classifiers route it on a learnt side. Any other method needs
``--impute``."""


@dataclass(frozen=True)
class MethodOptions:
    """Options every method accepts; ``extra`` carries method-specific knobs from the CLI."""

    seed: int = 0
    n_jobs: int = 1
    progress: bool = True
    quick: bool = False
    """A small sweep for demos and tests."""
    extra: dict[str, Any] = field(default_factory=dict)


MethodFn = Callable[[Any, Any, MethodOptions], list[Graph]]
"""(dataset: trainer.data.datasets.Dataset, hpc: trainer.hpc.HpcModel, options) -> policies."""

_REGISTRY: dict[str, MethodFn] = {}


def register(name: str) -> Callable[[MethodFn], MethodFn]:
    def wrap(fn: MethodFn) -> MethodFn:
        _REGISTRY[name] = fn
        return fn

    return wrap


def get_method(name: str) -> MethodFn:
    if name not in METHOD_MODULES:
        raise ValueError(f"unknown method {name!r}; choose one of {sorted(METHOD_MODULES)}")
    if name not in _REGISTRY:
        importlib.import_module(METHOD_MODULES[name])
    if name not in _REGISTRY:
        raise ValueError(f"module {METHOD_MODULES[name]} did not register method {name!r}")
    return _REGISTRY[name]
