"""CSTC on binary quadrant sets with decoys and unequal costs (issue 32; data it was not tuned
on: ``trainer.data.quadrant_decoys``, variants ``even`` and ``skewed``).

Per variant and seed: the set (4,000 rows, 60/20/20), the HPC (``fit_hpc``, not cached) and
CSTC's default sweep (``adaptedge train --method cstc``: six lambdas, escalation thresholds).
The point is CHOSEN ON VALIDATION, the cheapest frontier point whose validation accuracy is
>= 0.98, and reported on TEST beside the perfect tree's cost, with the tree it learned. Also
reported: the cheapest frontier point whose TEST accuracy is >= 0.98 (the issue's measure).
Acceptance per run: the validation-chosen point has test accuracy >= 0.98 at a test cost
within 15% of the perfect tree's.

Run: ``python -m benchmarks.cstc_quadrants [--variants even,skewed] [--seeds 0,1,2]
[--out FILE]``; prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

TARGET = 0.98
SLACK = 1.15


def run(variant: str, seed: int) -> dict[str, Any]:
    from adaptedge.trainer.data.quadrant_decoys import VARIANTS, decoy_quadrants
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.registry import MethodOptions, get_method
    from benchmarks.cstc import _points, cheapest_reaching
    from benchmarks.cstc_synthetic import tree_of

    dataset = decoy_quadrants(variant, seed=seed)
    perfect = VARIANTS[variant].perfect_cost()
    hpc = fit_hpc(dataset, seed=seed, cache=False)
    started = time.process_time()
    graphs = get_method("cstc")(dataset, hpc, MethodOptions(seed=seed, progress=False))
    cpu = time.process_time() - started
    points = _points(graphs, dataset, hpc)
    chosen = cheapest_reaching(points, TARGET)
    # the acceptance reads the cheapest point at test accuracy >= 0.98 (an oracle
    # figure, reported beside the point chosen on validation, never used to choose)
    on_test = [p for p in points if p["test"]["accuracy"] >= TARGET]  # reports-test: oracle
    best_test = (min(on_test, key=lambda p: p["test"]["cost"])  # reports-test: oracle
                 if on_test else None)
    out: dict[str, Any] = {"variant": variant, "seed": seed, "perfect_cost": perfect,
                           "cpu_seconds": round(cpu, 1), "hpc_test_accuracy": float(
                               (hpc.proba_test.argmax(axis=1) == dataset.y_test).mean()),
                           "chosen_on_validation": None, "cheapest_at_test_098": None,
                           "accepted": False}
    if best_test is not None:
        out["cheapest_at_test_098"] = {"name": best_test["name"], "test": best_test["test"],
                                       "cost_over_perfect": best_test["test"]["cost"] / perfect}
    if chosen is not None:
        graph = next(g for g in graphs if g.name == chosen["name"])
        test = chosen["test"]
        out["chosen_on_validation"] = {"name": chosen["name"], "val": chosen["val"],
                                       "test": test, "cost_over_perfect": test["cost"] / perfect,
                                       "tree": tree_of(graph)}
        out["accepted"] = test["accuracy"] >= TARGET and test["cost"] <= SLACK * perfect
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default="even,skewed")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", default="benchmarks/results/cstc/quadrants.json")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    runs = [run(v, int(s)) for v in args.variants.split(",") for s in args.seeds.split(",")]
    report = {"load_average_1min": [load, os.getloadavg()[0]], "runs": runs,
              "accepted": all(r["accepted"] for r in runs)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
