"""Operating points over seeds: does the chosen point hold on test? Prints one JSON object.

    python -m benchmarks.seeds PATH [PATH ...]

Each PATH is a ``dag.json`` (``python -m benchmarks.dag --seed S --adapt <dataset>``) or an
``adapt.json`` (``python -m benchmarks.adapt --seed S``), or a directory holding them. Per dataset and method family, per
seed: the point chosen on validation by the operating-point rule
(``protocol.operating_points.confidently_near``: Wilson lower bound >= HPC - 0.01) and, for
comparison, by the point estimate (the old rule); each reported on test with whether its test
accuracy is >= the HPC's test accuracy - 0.01 and its cost reduction against always-cloud.
Then the fraction that hold and the cost reduction's mean and sample sd over seeds. For
``dag.json`` inputs also ``dag-vs-static``: the DAG and the best static subset at the
all-sensors classifier's validation accuracy - 0.01 (``benchmarks.dag``'s ``at_1pct``), re-chosen
from the stored points by the same lower-bound rule (so files written under the old rule are
read under the current one), their test costs and cost ratio per seed, mean and sd. Nothing
is chosen on test.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

DAG_FAMILIES = {"dag": ("dag", "dag-no-escalation"), "adapt-gbrt": ("adapt-gbrt",)}


def _choose(points: list[dict[str, float]], hpc_val: float, n_val: int, confident: bool
            ) -> int | None:
    from adaptedge.protocol.operating_points import cheapest_reaching, confidently_near
    from adaptedge.trainer.policy.graph import Metrics

    scores = [Metrics(accuracy=p["val_accuracy"], cost=p["val_cost"]) for p in points]
    if confident:
        return confidently_near(scores, hpc_val, 0.01, n_val, fallback=False)
    return cheapest_reaching(scores, hpc_val - 0.01)


def _row(points: list[dict[str, float]], run: dict[str, float], confident: bool
         ) -> dict[str, Any] | None:
    i = _choose(points, run["hpc_val"], int(run["n_val"]), confident)
    if i is None:
        return None
    p = points[i]
    return {"test_accuracy": p["test_accuracy"], "test_cost": p["test_cost"],
            "val_accuracy": p["val_accuracy"],
            "holds": p["test_accuracy"] >= run["hpc_test"] - 0.01,
            "cost_reduction": 1.0 - p["test_cost"] / run["cloud_cost"]}


def _flat(p: dict[str, Any], val: str) -> dict[str, float]:
    return {"val_accuracy": p[val]["accuracy"], "val_cost": p[val]["cost"],
            "test_accuracy": p["test"]["accuracy"], "test_cost": p["test"]["cost"]}


def _runs(path: Path) -> list[tuple[str, str, int, dict[str, float], list[dict[str, float]]]]:
    """(dataset, family, seed, run facts, points) of one benchmark output (file or directory)."""
    files = [path / n for n in ("dag.json", "adapt.json") if (path / n).is_file()] if (
        path.is_dir()) else [path]
    out = []
    for file in files:
        report = json.loads(file.read_text())
        seed = report.get("seed", 0)
        for name, r in report["datasets"].items():
            out += _adapt_runs(name, seed, r) if "methods" in r else _dag_runs(name, seed, r)
    return out


def _dag_runs(name: str, seed: int, r: dict[str, Any]) -> list[Any]:
    run = {"hpc_val": r["hpc_val_accuracy"], "hpc_test": r["hpc_accuracy"],
           "cloud_cost": r["always_cloud_cost"],
           "n_val": r.get("validation_rows") or _n_val(name, seed)}
    out = []
    for family, members in DAG_FAMILIES.items():
        pts = [_flat(p, "val") for p in r["points"] if p["family"] in members]
        if pts:
            out.append((name, family, seed, run, pts))
    return out


def _adapt_runs(name: str, seed: int, r: dict[str, Any]) -> list[Any]:
    h = r["hpc"]
    run = {"hpc_val": h["validation_accuracy"], "hpc_test": h["test_accuracy"],
           "cloud_cost": h["cost"], "n_val": h.get("validation_rows") or _n_val(name, seed)}
    return [(name, family, seed, run, [_flat(p, "validation") for p in res["points"]])
            for family, res in r["methods"].items()]


def _n_val(name: str, seed: int) -> int:
    from adaptedge.trainer.data.datasets import load_dataset

    return len(load_dataset(name, seed=seed).y_val)


def _summary(rows: list[dict[str, Any] | None]) -> dict[str, Any]:
    chosen = [r for r in rows if r is not None]
    reductions = [r["cost_reduction"] for r in chosen]
    return {"holds": sum(bool(r["holds"]) for r in chosen), "chosen": len(chosen),
            "seeds": len(rows),
            "cost_reduction_mean": statistics.fmean(reductions) if reductions else None,
            "cost_reduction_sd": statistics.stdev(reductions) if len(reductions) > 1 else None}


def summarise(paths: list[Path]) -> dict[str, Any]:
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for path in paths:
        for name, family, seed, run, pts in _runs(path):
            entry = table.setdefault(name, {}).setdefault(family, {"per_seed": {}})
            entry["per_seed"][str(seed)] = {
                "hpc_test_accuracy": run["hpc_test"], "hpc_val_accuracy": run["hpc_val"],
                "validation_rows": run["n_val"],
                "lower_bound_rule": _row(pts, run, True), "point_estimate_rule": _row(pts, run, False)}
    for families in table.values():
        for entry in families.values():
            seeds = list(entry["per_seed"].values())
            for rule in ("lower_bound_rule", "point_estimate_rule"):
                entry[rule] = _summary([s[rule] for s in seeds])
    for name, comparison in _static_comparisons(paths).items():
        table.setdefault(name, {})["dag-vs-static"] = comparison
    return table


def _static_comparisons(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """Per dataset of the ``dag.json`` inputs: DAG vs static at all-sensors - 0.01, per seed."""
    from benchmarks.dag import chosen

    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        files = [path / "dag.json"] if path.is_dir() else [path]
        for file in (f for f in files if f.is_file()):
            report = json.loads(file.read_text())
            for name, r in report["datasets"].items():
                if "methods" in r:
                    continue
                n_val = r.get("validation_rows") or _n_val(name, report.get("seed", 0))
                target = r["all_sensors_val_accuracy"] - 0.01
                picks = {fam: chosen([p for p in r["points"] if p["family"] in members],
                                     target, n_val)
                         for fam, members in (("dag", ("dag", "dag-no-escalation")),
                                              ("static", ("static",)))}
                ratio = (picks["dag"]["test_cost"] / picks["static"]["test_cost"]
                         if picks["dag"] and picks["static"] else None)
                out.setdefault(name, {"per_seed": {}})["per_seed"][str(report.get("seed", 0))] = {
                    "all_sensors_test_accuracy": r["all_sensors_accuracy"], **picks,
                    "ratio": ratio}
    for entry in out.values():
        seeds = list(entry["per_seed"].values())
        for key, values in (
                ("dag_test_cost", [s["dag"]["test_cost"] for s in seeds if s["dag"]]),
                ("static_test_cost", [s["static"]["test_cost"] for s in seeds if s["static"]]),
                ("ratio", [s["ratio"] for s in seeds if s["ratio"] is not None])):
            entry[key] = {"seeds": len(values), "mean": statistics.fmean(values) if values else None,
                          "sd": statistics.stdev(values) if len(values) > 1 else None}
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(summarise([Path(a) for a in args]), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
