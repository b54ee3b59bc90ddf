"""The default sweep never loses to ``--quick`` on validation.

Each method's ``--quick`` sweep uses other settings than its default one (smaller models,
other grid points), so its front can reach where the default's does not: on letter-binary the
quick ADAPT-GBRT front starts at cost 2.0, the default's at 4.0. ``adaptedge train`` without
``--quick`` therefore runs both sweeps and keeps the validation front of their union
(``default_and_quick``): every quick point is then on the default front or beaten there. The
quick sweep is a small fraction of the default's time (letter-binary ADAPT-GBRT: a few seconds
of a 30 s run). Not for the indexed methods (their bundles ship every model of one lattice)
nor ``auto`` (it runs the other methods itself).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from adaptedge.trainer.methods.registry import INDEXED_METHODS, MethodFn, MethodOptions
from adaptedge.trainer.policy.frontier import Front
from adaptedge.trainer.policy.graph import Graph

QUICK_TAG = "quick"
"""Appended to a quick candidate's name that a default candidate already has."""


def includes_quick(method: str, quick: bool) -> bool:
    """Whether ``train --method method`` adds the quick sweep (the default sweep of a method
    that is neither indexed nor ``auto``)."""
    return not quick and method not in INDEXED_METHODS and method != "auto"


def run_sweep(method: str, method_fn: MethodFn, dataset: Any, hpc: Any,
              options: MethodOptions) -> list[Graph]:
    """The candidates ``train --method method`` takes the front of: the method's sweep, and
    with it the quick sweep's where ``includes_quick``."""
    if includes_quick(method, options.quick):
        return default_and_quick(method_fn, dataset, hpc, options)
    return method_fn(dataset, hpc, options)


def default_and_quick(method_fn: MethodFn, dataset: Any, hpc: Any,
                      options: MethodOptions) -> Front[Graph]:
    """The default sweep's candidates, then the quick sweep's (renamed where a name repeats);
    ``swept`` counts both. Of equal points the front keeps the first, the default's."""
    default = method_fn(dataset, hpc, options)
    if options.progress:
        print("[adaptedge] train: the --quick sweep too (its points join the default's front)",
              file=sys.stderr, flush=True)
    quick = method_fn(dataset, hpc, replace(options, quick=True))
    return Front([*default, *renamed(quick, {g.name for g in default})],
                 swept_count(default) + swept_count(quick))


def renamed(graphs: Sequence[Graph], taken: set[str]) -> list[Graph]:
    """``graphs`` with any name in ``taken`` (or repeated) tagged ``-quick`` (then ``-quick2``,
    ...)."""
    out: list[Graph] = []
    taken = set(taken)
    for graph in graphs:
        name, n = graph.name, 1
        while name in taken:
            name = f"{graph.name}-{QUICK_TAG}{'' if n == 1 else n}"
            n += 1
        taken.add(name)
        out.append(graph if name == graph.name else replace(graph, name=name))
    return out


def swept_count(candidates: Sequence[Graph]) -> int:
    """How many candidates a method walked (a method's own ``Front`` may have pruned them)."""
    return candidates.swept if isinstance(candidates, Front) else len(candidates)
