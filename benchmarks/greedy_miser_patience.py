"""Greedy Miser's validation patience: where each λ's best validation iteration lies at the
paper's protocol (3,000 trees), and what stopping after ``patience`` trees without a gain keeps.

For each λ of the default sweep, one full fit (``FULL_STRENGTH``, no stop) on the training rows
of ``train``'s split (``--seed``), its validation accuracy after every tree on the selection rows
``train`` chooses on (the certify rows held out), and, for each patience, the trees a stopped fit
grows (rounds of 20, as ``ValidationPatience`` checks) and the best iteration it keeps, against
the full fit's. One process per λ (``--jobs``), one BLAS thread each.

    python -m benchmarks.greedy_miser_patience [--datasets gas,letter-binary] [--seed 0]
                                               [--patience 200,400,600,1000] [--jobs 2]

Prints one JSON object: per dataset and λ the fit's seconds and full best iteration and accuracy;
per patience the trees grown in all (of 8 x 3,000) and the λs whose best iteration is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np


def curve(job: tuple[Any, float, int]) -> tuple[float, float, list[float]]:
    """One λ's full fit: (seconds, λ, validation accuracy after each tree)."""
    from threadpoolctl import threadpool_limits

    from adaptedge.trainer.methods.gating import CostModel
    from adaptedge.trainer.methods.greedy_miser import FULL_STRENGTH, GreedyMiser

    dataset, gamma, seed = job
    cm = CostModel.build(dataset.sensors, dataset.cost_weights, dataset.link,
                         dataset.n_features, [s.name for s in dataset.sensors])
    with threadpool_limits(1):
        start = time.perf_counter()
        model = GreedyMiser(feature_sensor=cm.feature_sensor.tolist(),
                            sensor_costs=cm.sensor_costs.tolist(), **FULL_STRENGTH,
                            gamma=gamma, random_state=seed).fit(dataset.X_train, dataset.y_train)
        accuracy = model.staged_accuracy(dataset.X_val, dataset.y_val).tolist()
    return time.perf_counter() - start, gamma, accuracy


def stopped_at(accuracy: list[float], patience: int, round_trees: int = 20) -> tuple[int, int]:
    """(trees grown, best iteration kept) of a fit stopped after ``patience`` trees without a
    validation gain, checked at the end of each round."""
    best, best_at = -1.0, 0
    for t, a in enumerate(accuracy, start=1):
        if a > best:
            best, best_at = a, t
        if t % round_trees == 0 and t - best_at >= patience:
            return t, best_at
    return len(accuracy), best_at


def run(name: str, seed: int, patiences: list[int], jobs: int) -> dict[str, Any]:
    from joblib import Parallel, delayed

    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.data.splits import DEFAULT_CERTIFY_FRACTION, hold_out_certify
    from adaptedge.trainer.methods.greedy_miser import GAMMAS

    dataset, _ = hold_out_certify(load_dataset(name, seed=seed), DEFAULT_CERTIFY_FRACTION, seed)
    fits = Parallel(n_jobs=jobs)(delayed(curve)((dataset, float(g), seed)) for g in GAMMAS)
    curves = {f"{g:g}": a for _, g, a in fits}
    per_gamma = {f"{g:g}": {"seconds": round(s, 1), "trees": len(a),
                            "best_iteration": int(np.argmax(a)) + 1,
                            "best_accuracy": round(float(np.max(a)), 5)}
                 for s, g, a in fits}
    stops = {}
    for p in patiences:
        runs = {g: stopped_at(a, p) for g, a in curves.items()}
        stops[str(p)] = {
            "trees": sum(t for t, _ in runs.values()),
            "same_best": [g for g, (_, b) in runs.items()
                          if b == per_gamma[g]["best_iteration"]],
            "differs": {g: {"kept": b, "accuracy": round(curves[g][b - 1], 5)}
                        for g, (_, b) in runs.items() if b != per_gamma[g]["best_iteration"]},
        }
    return {"validation_rows": len(dataset.y_val), "full_trees": sum(len(a) for *_, a in fits),
            "per_gamma": per_gamma, "patience": stops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="gas,letter-binary")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--patience", default="200,400,600,1000")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    patiences = [int(p) for p in args.patience.split(",")]
    out = {"seed": args.seed, "load_before": os.getloadavg()[0], "results": {}}
    for name in args.datasets.split(","):
        out["results"][name] = run(name, args.seed, patiences, args.jobs)
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
