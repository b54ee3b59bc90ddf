"""CSTC, CSCC and Cronus beside Greedy Miser, ADAPT-GBRT and the DAG, on the same splits/seed.

Per dataset: fit (or load) the HPC once, run every method's default sweep (``--quick``: the
quick sweeps) timing its CPU seconds, walk every candidate with the one float64 walk on
validation and test. Points are CHOSEN ON VALIDATION and reported on TEST:
``best_within_1pct`` is the cheapest validation-frontier point whose validation accuracy is
>= the HPC's - 0.01; ``vs_greedy_miser``: Greedy Miser's most accurate validation point, and
each method's cheapest point whose validation accuracy reaches it. Writes
``<out>/cstc.json``, ``<out>/cstc-<dataset>.json`` (as each dataset finishes) and
``<out>/cstc-<dataset>.png`` (test accuracy vs cost of every
validation-frontier point); prints the JSON.

Run: ``python -m benchmarks.cstc [--quick] [--datasets letter-binary,thyroid] [--seed 0]
[--methods cstc,cscc,cronus,greedy-miser,adapt-gbrt,dag] [--out DIR]``; ``cstc-boosted`` and
``cscc-boosted`` are CSTC and CSCC with ``features=boosted``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

DATASETS = ("letter-binary", "thyroid", "miniboone-tiny", "gas")
METHODS = ("cstc", "cscc", "cronus", "greedy-miser", "adapt-gbrt", "dag")
VARIANTS = {"cronus": ("cscc", {"variant": "cronus"}),
            "cstc-boosted": ("cstc", {"features": "boosted"}),
            "cscc-boosted": ("cscc", {"features": "boosted"})}
"""Method keys beyond the registry's names: (registered method, its --param options)."""


def _run(method: str, dataset: Any, hpc: Any, quick: bool, seed: int) -> tuple[list[Any], float]:
    from adaptedge.trainer.methods.registry import MethodOptions, get_method

    name, extra = VARIANTS.get(method, (method, {}))
    started = time.process_time()
    graphs = get_method(name)(dataset, hpc, MethodOptions(seed=seed, quick=quick,
                                                          progress=False, extra=extra))
    return graphs, time.process_time() - started


def _points(graphs: list[Any], dataset: Any, hpc: Any) -> list[dict[str, Any]]:
    from adaptedge.trainer.methods.dag.problem import problem_from
    from adaptedge.trainer.policy.frontier import pareto_frontier
    from adaptedge.trainer.policy.walk import walk

    table = problem_from(dataset, hpc).cost_table()
    out = []
    for g in pareto_frontier(graphs):
        test = walk(g, dataset.X_test, hpc.proba_test, table).metrics(dataset.y_test)
        out.append({"name": g.name, "params": {k: str(v) for k, v in g.params.items()},
                    "val": {"accuracy": g.validation.accuracy, "cost": g.validation.cost},
                    "test": {"accuracy": test.accuracy, "cost": test.cost,
                             "escalation_rate": test.escalation_rate}})
    return out


def cheapest_reaching(points: list[dict[str, Any]], target: float) -> dict[str, Any] | None:
    ok = [p for p in points if p["val"]["accuracy"] >= target - 1e-12]
    return min(ok, key=lambda p: p["val"]["cost"]) if ok else None


def _plot(name: str, results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for method, entry in results["methods"].items():
        pts = sorted(entry["frontier"], key=lambda p: p["val"]["cost"])  # frontier order
        ax.plot([p["test"]["cost"] for p in pts], [p["test"]["accuracy"] for p in pts],
                marker="o", ms=3, label=method)
    ax.axhline(results["hpc_test_accuracy"], color="grey", ls=":", label="HPC")
    ax.set_xlabel("mean test cost per decision (training scalar)")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"{name}: validation-frontier points on test")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / f"cstc-{name}.png", dpi=110)
    plt.close(fig)


def bench(name: str, methods: list[str], quick: bool, seed: int, out: Path) -> dict[str, Any]:
    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.hpc import fit_hpc

    dataset = load_dataset(name, seed=seed)
    hpc = fit_hpc(dataset, seed=seed)
    hpc_test = float((hpc.proba_test.argmax(axis=1) == dataset.y_test).mean())
    result: dict[str, Any] = {"seed": seed, "quick": quick, "hpc_val_accuracy": hpc.val_accuracy,
                              "hpc_test_accuracy": hpc_test, "methods": {}}
    for method in methods:
        graphs, cpu = _run(method, dataset, hpc, quick, seed)
        frontier = _points(graphs, dataset, hpc)
        best = cheapest_reaching(frontier, hpc.val_accuracy - 0.01)
        result["methods"][method] = {"cpu_seconds": round(cpu, 1), "candidates": len(graphs),
                                     "frontier": frontier, "best_within_1pct": best}
    if "greedy-miser" in result["methods"]:
        gm = max(result["methods"]["greedy-miser"]["frontier"],
                 key=lambda p: (p["val"]["accuracy"], -p["val"]["cost"]))
        result["vs_greedy_miser"] = {"greedy_miser": gm, **{
            m: cheapest_reaching(e["frontier"], gm["val"]["accuracy"])
            for m, e in result["methods"].items() if m != "greedy-miser"}}
    _plot(name, result, out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"load_average_1min": os.getloadavg()[0], "datasets": {}}
    for name in args.datasets.split(","):  # each dataset's JSON as soon as it is done
        report["datasets"][name] = bench(name, args.methods.split(","), args.quick, args.seed,
                                         out)
        (out / f"cstc-{name}.json").write_text(json.dumps(report["datasets"][name], indent=1))
    (out / "cstc.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
