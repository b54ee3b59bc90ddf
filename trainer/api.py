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
from adaptedge.trainer.bundle_export import export_bundle
from adaptedge.trainer.datasets import load_dataset
from adaptedge.trainer.frontier import pareto_frontier, pick_near_accuracy, pick_within_budget
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.methods import MethodOptions, get_method
from adaptedge.trainer.parallel import use_cluster

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
                 force: bool = False, cluster: str | None = None) -> Manifest:
    """Train ``method`` on ``data`` and write a verified bundle to ``out``; returns its manifest.

    The bundle holds the validation frontier of the method's sweep. The default operating
    point is the most accurate within ``budget`` when given, else the cheapest whose validation
    accuracy is within 1% of the HPC's (else the most accurate). Training time, method,
    dataset, seed and library versions go into the manifest metadata. ``out`` must be new, an
    empty directory or, with ``force``, a bundle to replace (checked before training).
    ``cluster``: a Dask scheduler address (``tcp://HOST:PORT``) that runs the sweep's fits
    (``trainer.parallel``); ``n_jobs`` still sizes the work done here.
    """
    out = check_target(out, force=force)  # absolute: "--out ." stays valid once replaced
    with use_cluster(cluster):
        return _train(data, method, out, target=target, costs=costs, grouping=grouping,
                      budget=budget, quick=quick, seed=seed, n_jobs=n_jobs, progress=progress,
                      hpc_kind=hpc_kind, hpc_onnx=hpc_onnx, extra=extra, force=force)


def _train(data: str, method: str, out: Path, *, target: str | None,
           costs: str | Path | None, grouping: str | None, budget: float | None, quick: bool,
           seed: int, n_jobs: int, progress: bool, hpc_kind: Any, hpc_onnx: str | Path | None,
           extra: Mapping[str, Any] | None, force: bool) -> Manifest:
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
        default = pick_near_accuracy(frontier, hpc.val_accuracy, DEFAULT_TOLERANCE)
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
    export_bundle(out, dataset, hpc, frontier, default=default.name, metadata=meta, force=force)
    return verify(out)
