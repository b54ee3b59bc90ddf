"""One call from data to bundle: load the dataset, fit the HPC, run a method's sweep, keep the
validation frontier, choose the default operating point, export and verify the bundle."""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Mapping
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from adaptedge.protocol.bundle import check_target, verify
from adaptedge.protocol.manifest import Manifest
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.data.splits import split_recipe
from adaptedge.trainer.export.bundle import export_bundle
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.methods.registry import MethodOptions, get_method
from adaptedge.trainer.policy.frontier import (
    pareto_frontier,
    pick_near_accuracy,
    pick_within_budget,
)

DEFAULT_TOLERANCE = 0.01
"""The default operating point is the cheapest within this accuracy of the HPC (validation)."""


class TrainError(ValueError):
    """Training produced nothing usable (e.g. a method returned no candidate policies)."""


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for dist in ("adaptedge", "numpy", "scikit-learn", "onnx", "onnxruntime", "skl2onnx"):
        try:
            versions[dist] = importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return versions


def train_bundle(data: str, method: str, out: str | Path, *, target: str | None = None,
                 costs: str | Path | None = None, grouping: str | None = None,
                 budget: float | None = None, quick: bool = False, seed: int = 0,
                 n_jobs: int = 1, progress: bool = True, hpc_kind: Any = "auto",
                 hpc_onnx: str | Path | None = None, extra: Mapping[str, Any] | None = None,
                 force: bool = False) -> Manifest:
    """Train ``method`` on ``data`` and write a verified bundle to ``out``; returns its manifest.

    The bundle holds the validation frontier of the method's sweep. The default operating
    point is the most accurate within ``budget`` when given, else the cheapest whose validation
    accuracy is within 1% of the HPC's with 97.5% confidence (a Wilson lower bound; else the
    one with the highest bound). Training time, method,
    dataset, seed and library versions go into the manifest metadata. ``out`` must be new, an
    empty directory or, with ``force``, a bundle to replace (checked before training).
    """
    out = check_target(out, force=force)  # absolute: "--out ." stays valid once replaced
    started = time.perf_counter()
    show = progress and sys.stderr.isatty()
    method_fn = get_method(method)
    dataset = load_dataset(data, target=target, costs=costs, grouping=grouping, seed=seed)
    hpc = fit_hpc(dataset, kind=hpc_kind, seed=seed, n_jobs=n_jobs, onnx_path=hpc_onnx,
                  progress=show)
    hpc_seconds = time.perf_counter() - started
    options = MethodOptions(seed=seed, n_jobs=n_jobs, progress=show, quick=quick,
                            extra=dict(extra or {}))
    candidates = list(method_fn(dataset, hpc, options))
    if not candidates:
        raise TrainError(f"method {method!r} returned no candidate policies on {dataset.name}")
    frontier = pareto_frontier(candidates)
    if budget is not None:
        default = pick_within_budget(frontier, budget)
    else:
        default = pick_near_accuracy(frontier, hpc.val_accuracy, DEFAULT_TOLERANCE,
                                     n_rows=len(dataset.y_val))
    meta: dict[str, Any] = {
        "method": method,
        "dataset": dataset.name,
        "dataset_description": dataset.description,
        "seed": seed,
        "quick": quick,
        "budget": budget,
        "n_candidates": len(candidates),
        "hpc_seconds": round(hpc_seconds, 3),
        "train_seconds": round(time.perf_counter() - started, 3),
        "library_versions": library_versions(),
        "extra": {k: v if isinstance(v, int | float | str | bool) else repr(v)
                  for k, v in sorted((extra or {}).items())},
    }
    export_bundle(out, dataset, hpc, frontier, default=default.name, metadata=meta, force=force,
                  split=split_recipe(dataset, seed))
    return verify(out)
