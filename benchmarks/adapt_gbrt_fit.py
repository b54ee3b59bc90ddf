"""CPU seconds of the default ADAPT-GBRT sweep's fits on letter-binary; prints JSON.

    python -m benchmarks.adapt_gbrt_fit [--data NAME] [--fits N] [--repeats R]

The path ``adaptedge train --data letter-binary --method adapt-gbrt`` runs: the first ``N``
settings of the default (P_full, γ) grid (``adapt_gbrt_method.sweep_settings``, no warm
starts), each fitted ``R`` times in this process on the training split with the HPC's
out-of-fold probabilities (the HPC from the cache, fitted once if missing), seed 0.
``fit_cpu_s`` holds each setting's median CPU seconds; ``trees_sha256`` is a digest of every
tree's arrays, equal across runs (and commits) that grow the same trees.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time
from collections.abc import Mapping
from typing import Any

import numpy as np


def fit_seconds(data: str, fits: int, repeats: int,
                overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Each of the first ``fits`` default settings fitted ``repeats`` times on ``data``
    (``overrides``: estimator parameters replaced in every setting, e.g. fewer rounds)."""
    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.adapt_gbrt import AdaptGbrtClassifier
    from adaptedge.trainer.methods.adapt_gbrt_method import sweep_settings
    from adaptedge.trainer.methods.gating import CostModel
    from adaptedge.trainer.methods.registry import MethodOptions

    dataset = load_dataset(data)
    hpc = fit_hpc(dataset, seed=0, n_jobs=1)
    cost_model = CostModel.build(dataset.sensors, dataset.cost_weights, dataset.link,
                                 dataset.n_features, hpc.sensors)
    options = MethodOptions(seed=0, quick=False, n_jobs=1, progress=False,
                            extra={"warm_start": False})
    settings = [{**s, **(overrides or {})}
                for s in sweep_settings(dataset, hpc, options, cost_model)[:fits]]
    out: dict[str, Any] = {"data": data, "seed": 0, "repeats": repeats, "fit_cpu_s": []}
    digest = hashlib.sha256()
    for params in settings:
        times = []
        for _ in range(repeats):
            started = time.process_time()
            model = AdaptGbrtClassifier(**params).fit(dataset.X_train, dataset.y_train,
                                                      hpc.oof_proba_train)
            times.append(time.process_time() - started)
        out["fit_cpu_s"].append({"p_full": params["p_full"], "gamma": params["gamma"],
                                 "median": round(statistics.median(times), 3),
                                 "all": [round(t, 3) for t in times]})
        for tree in model.f1_trees_ + model.g_trees_:
            for part in (tree.feature, tree.threshold, tree.left, tree.right, tree.value):
                digest.update(np.ascontiguousarray(part).tobytes())
    out["total_median_cpu_s"] = round(sum(f["median"] for f in out["fit_cpu_s"]), 3)
    out["trees_sha256"] = digest.hexdigest()[:24]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="letter-binary")
    ap.add_argument("--fits", type=int, default=3, help="default-grid settings to fit")
    ap.add_argument("--repeats", type=int, default=3, help="fits of each setting")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    out = fit_seconds(args.data, args.fits, args.repeats)
    print(json.dumps({**out, "load_before": load_before, "load_after": os.getloadavg()[0]},
                     indent=1))


if __name__ == "__main__":
    main()
