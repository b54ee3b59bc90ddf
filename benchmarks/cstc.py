"""CSTC, CSCC and Cronus beside Greedy Miser, ADAPT-GBRT and the DAG, on the same splits/seed.

Per dataset: fit (or load) the HPC once, run every method's default sweep (``--quick``: every
method's quick sweep; ``--quick-methods a,b``: only those) timing its CPU and wall seconds,
walk every validation-frontier candidate with the one float64 walk on test. Points are CHOSEN
ON VALIDATION and reported on TEST:

- ``best_within_1pct``: the operating-point rule of the whole project
  (``protocol.operating_points.confidently_near``): the cheapest point whose validation
  accuracy's Wilson lower bound on the validation rows is >= the HPC's validation accuracy
  - 0.01 (``None``: no point is); its test accuracy with the 95% Wilson interval on the test
  rows, test cost and ``cost_reduction`` against always-cloud (every sensor plus the link).
- ``vs_greedy_miser``: Greedy Miser's most accurate validation point, and each method's
  cheapest point whose validation accuracy reaches it (a comparison at equal validation
  accuracy, by the point estimate, as the paper's), both reported on test.

Writes ``<out>/cstc-<dataset>.json`` as each dataset finishes, merges it into
``<out>/cstc.json`` and draws ``<out>/cstc-<dataset>.png`` (test accuracy vs test cost of
every validation-frontier point; the ``best_within_1pct`` points starred). ``--table`` prints
the README's markdown table from the per-dataset JSON files in ``--out``.

Run: ``python -m benchmarks.cstc [--quick] [--quick-methods adapt-gbrt,dag]
[--datasets letter-binary,thyroid] [--seed 0] [--methods cstc,cscc,...] [--out DIR]``;
``python -m benchmarks.cstc --table [--out DIR]``. ``cstc-boosted`` and ``cscc-boosted`` are
CSTC and CSCC with ``features=boosted`` (each tree evaluation charged 0.01 of a mean sensor
read); ``greedy-miser-charged`` is Greedy Miser with the same charge for each of its trees.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATASETS = ("letter-binary", "thyroid", "miniboone-tiny", "gas")


@dataclass(frozen=True)
class Spec:
    """One compared method: its registry name and the ``--param`` options it runs with."""

    method: str
    extra: dict[str, str] = field(default_factory=dict)


METHODS: dict[str, Spec] = {
    "cstc": Spec("cstc"),
    "cscc": Spec("cscc"),
    "cronus": Spec("cscc", {"variant": "cronus"}),
    "cstc-boosted": Spec("cstc", {"features": "boosted"}),
    "cscc-boosted": Spec("cscc", {"features": "boosted"}),
    "greedy-miser": Spec("greedy-miser"),
    # Greedy Miser charged for its trees as CSTC-boosted is (one tree: 0.01 of a sensor read)
    "greedy-miser-charged": Spec("greedy-miser", {"tree_cost": "0.01"}),
    "adapt-gbrt": Spec("adapt-gbrt"),
    "dag": Spec("dag"),
}
"""The method table: row name -> how to train it. Add a row to compare another method."""


def _cpu() -> float:
    """CPU seconds of this process and its finished children (user + system)."""
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _run(name: str, dataset: Any, hpc: Any, quick: bool, seed: int
         ) -> tuple[list[Any], float, float]:
    """Train one method's sweep: (graphs, CPU seconds, wall seconds)."""
    from adaptedge.trainer.methods.registry import MethodOptions, get_method

    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(METHODS)}")
    spec = METHODS[name]
    cpu, wall = _cpu(), time.perf_counter()
    graphs = get_method(spec.method)(dataset, hpc, MethodOptions(
        seed=seed, quick=quick, progress=False, extra=dict(spec.extra)))
    return graphs, _cpu() - cpu, time.perf_counter() - wall


def _points(graphs: list[Any], dataset: Any, hpc: Any) -> list[dict[str, Any]]:
    """The validation frontier (cost ascending), each point walked on test too."""
    from adaptedge.protocol.operating_points import wilson_interval
    from adaptedge.trainer.methods.dag.problem import problem_from
    from adaptedge.trainer.policy.frontier import pareto_frontier
    from adaptedge.trainer.policy.walk import walk

    table = problem_from(dataset, hpc).cost_table()
    n_test = len(dataset.y_test)
    out = []
    for g in pareto_frontier(graphs):
        test = walk(g, dataset.X_test, hpc.proba_test, table).metrics(dataset.y_test)
        out.append({"name": g.name, "params": {k: str(v) for k, v in g.params.items()},
                    "val": {"accuracy": g.validation.accuracy, "cost": g.validation.cost,
                            "escalation_rate": g.validation.escalation_rate},
                    "test": {"accuracy": test.accuracy, "cost": test.cost,
                             "escalation_rate": test.escalation_rate,
                             "accuracy_interval": list(wilson_interval(test.accuracy, n_test))}})
    return sorted(out, key=lambda p: p["val"]["cost"])


def best_within_1pct(points: list[dict[str, Any]], hpc_val: float, n_val: int,
                     always_cloud: float) -> dict[str, Any] | None:
    """The operating-point rule (Wilson lower bound on ``n_val`` rows >= ``hpc_val`` - 0.01),
    chosen on validation; ``None`` when no point is confidently within 1%."""
    from adaptedge.protocol.operating_points import confidently_near, wilson_interval
    from adaptedge.trainer.policy.graph import Metrics

    scores = [Metrics(accuracy=p["val"]["accuracy"], cost=p["val"]["cost"]) for p in points]
    i = confidently_near(scores, hpc_val, 0.01, n_val, fallback=False)
    if i is None:
        return None
    p = points[i]
    return {**p, "val_lower_bound": wilson_interval(p["val"]["accuracy"], n_val)[0],
            "cost_reduction": 1.0 - p["test"]["cost"] / always_cloud}


def cheapest_reaching(points: list[dict[str, Any]], target: float) -> dict[str, Any] | None:
    """The cheapest point whose validation accuracy (point estimate) is >= ``target``."""
    ok = [p for p in points if p["val"]["accuracy"] >= target - 1e-12]
    return min(ok, key=lambda p: (p["val"]["cost"], -p["val"]["accuracy"])) if ok else None


def _plot(name: str, results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for method, entry in results["methods"].items():
        pts = entry["frontier"]  # validation-cost order
        label = f"{method} (quick)" if entry["quick"] else method
        line, = ax.plot([p["test"]["cost"] for p in pts], [p["test"]["accuracy"] for p in pts],
                        marker="o", ms=3, lw=1, label=label)
        best = entry["best_within_1pct"]
        if best is not None:
            ax.plot(best["test"]["cost"], best["test"]["accuracy"], marker="*", ms=12,
                    color=line.get_color(), mec="black", mew=0.6, ls="none")
    ax.axhline(results["hpc_test_accuracy"], color="grey", ls=":", label="HPC (test)")
    ax.set_xlabel("mean test cost per decision (cost units)")
    ax.set_ylabel("test accuracy")
    low = min((p["test"]["accuracy"] for e in results["methods"].values()  # reports-test: axis
               for p in e["frontier"]), default=0.0)
    ax.set_ylim(max(low, results["hpc_test_accuracy"] - 0.15), None)
    ax.set_title(f"{name} (seed {results['seed']}): validation frontiers on test; "
                 "* = best_within_1pct", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / f"cstc-{name}.png", dpi=110)
    plt.close(fig)


def bench(name: str, methods: list[str], quick: set[str], seed: int, out: Path
          ) -> dict[str, Any]:
    """One dataset: every method's sweep, frontier, chosen points and the GM comparison."""
    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.dag.problem import problem_from

    dataset = load_dataset(name, seed=seed)
    hpc = fit_hpc(dataset, seed=seed)
    problem = problem_from(dataset, hpc)
    always_cloud = problem.total_cost + problem.link_cost
    n_val = len(dataset.y_val)
    hpc_test = float((hpc.proba_test.argmax(axis=1) == dataset.y_test).mean())
    result: dict[str, Any] = {
        "seed": seed, "load_average_1min_start": os.getloadavg()[0],
        "validation_rows": n_val, "test_rows": len(dataset.y_test),
        "hpc_val_accuracy": hpc.val_accuracy, "hpc_test_accuracy": hpc_test,
        "always_cloud_cost": always_cloud, "methods": {}}
    for method in methods:
        graphs, cpu, wall = _run(method, dataset, hpc, method in quick, seed)
        frontier = _points(graphs, dataset, hpc)
        result["methods"][method] = {
            "quick": method in quick, "cpu_seconds": round(cpu, 1),
            "wall_seconds": round(wall, 1), "candidates": len(graphs), "frontier": frontier,
            "best_within_1pct": best_within_1pct(frontier, hpc.val_accuracy, n_val,
                                                 always_cloud)}
    if "greedy-miser" in result["methods"]:
        gm_points = result["methods"]["greedy-miser"]["frontier"]
        gm = max(gm_points, key=lambda p: (p["val"]["accuracy"], -p["val"]["cost"]))
        result["vs_greedy_miser"] = {"greedy_miser": gm, **{
            m: cheapest_reaching(e["frontier"], gm["val"]["accuracy"])
            for m, e in result["methods"].items() if m != "greedy-miser"}}
    result["load_average_1min_end"] = os.getloadavg()[0]
    _plot(name, result, out)
    return result


def _fmt(point: dict[str, Any] | None, frontier: list[dict[str, Any]] | None = None) -> str:
    """A chosen point on test; for none, the most accurate validation point on test."""
    if point is None:
        top = frontier[-1] if frontier else None  # the frontier's most accurate on validation
        return "none" if top is None else (
            f"none (most accurate on val: {top['test']['accuracy']:.4f} at "
            f"{top['test']['cost']:.3g})")
    lo, hi = point["test"]["accuracy_interval"]
    return (f"{point['test']['accuracy']:.4f} [{lo:.3f}, {hi:.3f}] at "
            f"{point['test']['cost']:.3g} ({point['test']['escalation_rate']:.0%} esc.)")


def table(out: Path) -> str:
    """The README's markdown table from ``<out>/cstc-<dataset>.json``: per dataset and
    method, best_within_1pct on test (escalation rate), the test cost at Greedy Miser's most
    accurate validation point ("at GM"), CPU and wall seconds."""
    rows = ["| dataset (HPC test; always-cloud cost) | method | best_within_1pct | at GM "
            "| CPU s | wall s |", "|---|---|---|---|---|---|"]
    for name in DATASETS:
        path = out / f"cstc-{name}.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text())
        vs = r.get("vs_greedy_miser", {})
        first = f"{name} ({r['hpc_test_accuracy']:.4f}; {r['always_cloud_cost']:.3g})"
        for method, e in r["methods"].items():
            at_gm = vs.get("greedy_miser") if method == "greedy-miser" else vs.get(method)
            gm = "—" if at_gm is None else f"{at_gm['test']['cost']:.3g}"
            label = f"{method} (quick)" if e["quick"] else method
            rows.append(f"| {first} | {label} | {_fmt(e['best_within_1pct'], e['frontier'])} "
                        f"| {gm} | {e['cpu_seconds']:.0f} | {e['wall_seconds']:.0f} |")
            first = ""
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="every method's quick sweep")
    parser.add_argument("--quick-methods", default="", help="only these methods' quick sweep")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/cstc")
    parser.add_argument("--table", action="store_true", help="print the README table and stop")
    args = parser.parse_args()
    out = Path(args.out)
    if args.table:
        print(table(out))
        return
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown methods {unknown}; known: {', '.join(METHODS)}")
    quick = set(methods) if args.quick else {m for m in args.quick_methods.split(",") if m}
    out.mkdir(parents=True, exist_ok=True)
    merged_path = out / "cstc.json"
    merged = json.loads(merged_path.read_text()) if merged_path.exists() else {"datasets": {}}
    for name in args.datasets.split(","):  # each dataset's JSON as soon as it is done
        result = bench(name, methods, quick, args.seed, out)
        (out / f"cstc-{name}.json").write_text(json.dumps(result, indent=1))
        merged["datasets"][name] = result
        merged_path.write_text(json.dumps(merged, indent=1))
        print(json.dumps({m: {"cpu": e["cpu_seconds"], "wall": e["wall_seconds"],
                              "best_within_1pct": _fmt(e["best_within_1pct"])}
                          for m, e in result["methods"].items()}, indent=1), flush=True)


if __name__ == "__main__":
    main()
