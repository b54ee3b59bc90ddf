"""``--method auto`` against the methods it merges; prints one JSON object.

    python -m benchmarks.auto [--quick] [--datasets letter-binary,digits-binary]
        [--seeds 0,1,2,3,4] [--methods confidence,adapt-gbrt,...] [--out DIR] [--jobs N]
        [--val-fraction F]

Per dataset and seed: the HPC is fitted once; ``trainer.methods.auto.run_methods`` runs every
method auto plans (the same call ``--method auto`` makes), timing each; then, for each method
alone and for ``auto`` (``trainer.methods.auto.merge`` of them all, exactly what ``--method
auto`` exports), the validation front is exported in memory and its default point is chosen
as ``adaptedge train`` chooses it (``trainer.api.choose_default``: the paired rule on the
VALIDATION rows, walked on the exported ONNX). That point is reported on TEST: accuracy,
cost, ``cost_reduction = 1 - cost / HPC cost``, the HPC's test accuracy, whether it ``held``
(test accuracy >= the HPC's test accuracy - 0.01) and the paired lower bound on test (reported,
never used to choose). Nothing is chosen on test.

``digits-binary``: scikit-learn's bundled digits (no download), label digit >= 5, written to a
CSV in a temporary directory and read through the CSV path (seeded stratified 60/20/20 split,
every pixel its own sensor, uniform costs).
Writes ``<out>/auto-<dataset>-s<seed>.json`` as each finishes and ``<out>/auto.json``
(default out: ``benchmarks/results/auto``); ``--summarize`` only gathers the per-seed files
found under ``--out`` into ``<out>/auto.json`` (runs split over processes).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def digits_csv(directory: Path) -> Path:
    """scikit-learn's digits as a CSV: 64 pixel columns and ``label`` (``ge5`` / ``lt5``)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    path = directory / "digits-binary.csv"
    lines = [",".join([*(f"p{i}" for i in range(64)), "label"])]
    for row, digit in zip(digits.data, digits.target, strict=True):
        lines.append(",".join([*(f"{v:g}" for v in row), "ge5" if digit >= 5 else "lt5"]))
    path.write_text("\n".join(lines) + "\n")
    return path


def load(name: str, seed: int, tmp: Path) -> Any:
    from adaptedge.trainer.data.datasets import load_dataset

    if name == "digits-binary":
        return load_dataset(str(digits_csv(tmp)), target="label", seed=seed)
    return load_dataset(name, seed=seed)


def default_point(dataset: Any, hpc: Any, hpc_onnx: bytes, graphs: list[Any],
                  hpc_cost: float) -> dict[str, Any]:
    """The default point of ``graphs``' validation front as ``train`` picks it (validation),
    reported on test."""
    from adaptedge.protocol.operating_points import paired_lower_bound
    from adaptedge.trainer.api import choose_default
    from adaptedge.trainer.export.bundle import build_bundle, paired_on_validation
    from adaptedge.trainer.policy.frontier import pareto_frontier
    from adaptedge.trainer.policy.oracle import BundleRunner

    front = list(pareto_frontier(graphs))
    manifest, files = build_bundle(dataset, hpc, front, hpc_onnx=hpc_onnx)
    paired = paired_on_validation(manifest, files, dataset)
    point, _, certified = choose_default(front, paired, None)
    i = next(k for k, p in enumerate(front) if p is point)
    runner = BundleRunner.from_files(manifest, files)
    X, y = dataset.split("test")
    result = runner.evaluate(point.name, X, y)
    right = result.labels == y
    hpc_right = np.argmax(hpc.proba_test, axis=1) == y  # reports-test: row-wise prediction
    hpc_acc = float(np.mean(hpc_right))
    n = len(y)
    return {
        "point": point.name, "method": point.method, "certified": certified,
        "front_size": len(front),
        "validation": {"accuracy": point.validation.accuracy, "cost": point.validation.cost,
                       "paired_lower_bound": paired[i].lower_bound},
        "test": {"accuracy": result.accuracy, "cost": result.mean_cost,
                 "escalation_rate": result.escalation_rate,
                 "cost_reduction": 1 - result.mean_cost / hpc_cost if hpc_cost else 0.0,
                 "hpc_accuracy": hpc_acc, "held": result.accuracy >= hpc_acc - 0.01,
                 "paired_lower_bound": paired_lower_bound(
                     int(np.sum(right & ~hpc_right)), int(np.sum(~right & hpc_right)), n)},
    }


def run_one(name: str, seed: int, quick: bool, n_jobs: int, methods: str | None,
            tmp: Path, val_fraction: float | None = None) -> dict[str, Any]:
    from adaptedge.trainer.data.splits import with_val_fraction
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.auto import merge, run_methods
    from adaptedge.trainer.methods.gating import CostModel
    from adaptedge.trainer.methods.registry import MethodOptions

    d = load(name, seed, tmp)
    if val_fraction is not None:
        d = with_val_fraction(d, val_fraction, seed)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    hpc = fit_hpc(d, seed=seed, n_jobs=n_jobs, progress=False)
    hpc_seconds = time.perf_counter() - started
    cm = CostModel.build(d.sensors, d.cost_weights, d.link, d.n_features, hpc.sensors)
    hpc_cost = float(cm.sensor_costs[cm.hpc_sensors].sum() + cm.link_cost)
    extra: dict[str, Any] = {"time_budget": 1e9} | ({"methods": methods} if methods else {})
    options = MethodOptions(seed=seed, n_jobs=n_jobs, progress=True, quick=quick, extra=extra)
    done = run_methods(d, hpc, options)
    hpc_onnx = hpc.onnx_bytes()
    out: dict[str, Any] = {
        "dataset": name, "seed": seed, "quick": quick, "val_fraction": val_fraction,
        "description": d.description,
        "rows": {"train": len(d.y_train), "validation": len(d.y_val), "test": len(d.y_test)},
        "hpc": {"description": hpc.description, "validation_accuracy": hpc.val_accuracy,
                "cost": hpc_cost, "seconds": hpc_seconds},
        "skipped": dict(done.plan.skipped), "methods": {}}
    for method, graphs in done.candidates.items():
        out["methods"][method] = {"train_seconds": done.seconds[method],
                                  **default_point(d, hpc, hpc_onnx, list(graphs), hpc_cost)}
    merged = merge(done.candidates)
    out["methods"]["auto"] = {"train_seconds": sum(done.seconds.values()) + hpc_seconds,
                              **default_point(d, hpc, hpc_onnx, list(merged), hpc_cost),
                              "front_methods": sorted({g.method for g in merged})}
    out["load_average_1min"] = {"before": load_before, "after": os.getloadavg()[0]}
    return out


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per dataset (and ``--val-fraction``, when given) and method: mean test cost reduction
    of the default point over seeds, and on how many seeds it was certified on validation and
    held on test."""
    table: dict[str, dict[str, Any]] = {}
    for r in results:
        key = r["dataset"] + ("" if r.get("val_fraction") is None
                              else f" (val-fraction {r['val_fraction']:g})")
        for method, m in r["methods"].items():
            row = table.setdefault(key, {}).setdefault(
                method, {"seeds": [], "cost_reduction": [], "certified": 0, "held": 0})
            row["seeds"].append(r["seed"])
            row["cost_reduction"].append(round(m["test"]["cost_reduction"], 4))
            row["certified"] += bool(m["certified"])
            row["held"] += bool(m["test"]["held"])
    for rows in table.values():
        for row in rows.values():
            row["mean_cost_reduction"] = round(float(np.mean(row["cost_reduction"])), 4)
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--datasets", default="letter-binary,digits-binary")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--methods", help="auto's methods (default: its own plan)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--summarize", action="store_true",
                    help="run nothing: summarize every auto-*-s*.json under --out into "
                    "<out>/auto.json")
    ap.add_argument("--val-fraction", type=float,
                    help="as train --val-fraction: validation re-drawn from the training rows "
                    "to hold this share of all rows (test unchanged)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/auto"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        runs = [json.loads(p.read_text()) for p in sorted(args.out.rglob("auto-*-s*.json"))]
        body = {"summary": summary(runs), "runs": runs}
        (args.out / "auto.json").write_text(json.dumps(body, indent=1))
        print(json.dumps(body["summary"], indent=1))
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                r = run_one(name, seed, args.quick, args.jobs, args.methods, Path(tmp),
                            args.val_fraction)
                tag = "" if args.val_fraction is None else f"-v{args.val_fraction:g}"
                (args.out / f"auto-{name}{tag}-s{seed}.json").write_text(json.dumps(r, indent=1))
                results.append(r)
    body = {"summary": summary(results), "runs": results}
    suffix = ("-quick" if args.quick else "") + (
        "" if args.val_fraction is None else f"-v{args.val_fraction:g}")
    (args.out / f"auto{suffix}.json").write_text(json.dumps(body, indent=1))
    print(json.dumps(body, indent=1))


if __name__ == "__main__":
    main()
