"""PolyDom vs Greedy / GreedyAcc / GreedyCost vs the naive baselines (Indexing Cost Sensitive
Prediction, section 6), on the synthetic setting and on one real dataset with a cost that grows
with the item's size.

1. ``expansions``: feature sets expanded (= models trained) vs number of features on the
   synthetic data (interaction 0.9, ``--rows`` rows): PolyDom at two epsilons, Greedy (all alphas),
   NaiveExpandAll (2^n). Accuracies come from the node-classifier bank on VALIDATION.
2. ``index``: index size (stored entries) and lookup time (p50/p99 µs per (size, budget)
   query, one process, one run) of PolyDom vs PolyDomIndexAll vs NaiveLookup, over candidate
   sets of the paper's combiner accuracies (k = 2) with random cost polynomials.
3. ``accuracy``: TEST accuracy vs budget at fixed sizes on the synthetic data (10 features):
   every item runs the model its method's bundle index picks (validation accuracies), through
   the exported ONNX (``trainer.policy.budgeted``); ``over_budget`` must be 0.
4. ``real``: satimage with the four spectral bands as sensors; each item a tile of ``n`` x ``n``
   pixels (``n`` drawn log-uniformly in 8..64 — the data does not record it) and reading a band
   costs ``c0 + c2 n^2`` mJ (a fixed wake-up plus energy per pixel, different per band).
   Same accuracy-vs-budget check, plus the anti-monotonicity check (every subset/superset
   pair of the full lattice: how often and how much a superset is LESS accurate on validation)
   on satimage (bands) and letter (4x4).

Writes ``<out>/polydom.json`` and PNGs ``polydom-*.png``; prints the JSON.
Run: ``python -m benchmarks.polydom [--quick] [--out DIR] [--rows N] [--parts a,b]``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

METHODS = ("polydom", "greedy", "greedy-acc", "greedy-cost")
PARTS = ("expansions", "index", "accuracy", "real", "anti_monotonicity")


def cached(fn: Any) -> Any:
    memo: dict[int, float] = {}

    def acc(mask: int) -> float:
        if mask not in memo:
            memo[mask] = fn(mask)
        return memo[mask]

    return acc


def bank_for(dataset: Any) -> Any:
    from adaptedge.trainer.methods.dag.bank import ClassifierBank
    from adaptedge.trainer.methods.dag.problem import make_problem

    data = {s: (X, y, np.full((len(y), len(dataset.classes)), 1 / len(dataset.classes)))
            for s, (X, y) in zip(("train", "val", "test"),
                                 (dataset.split(n) for n in ("train", "validation", "test")),
                                 strict=True)}
    problem = make_problem(sensors=dataset.sensors, weights=dataset.cost_weights,
                           link=dataset.link, n_classes=len(dataset.classes), data=data)
    return ClassifierBank(problem, kind="lr", seed=0)


def expansions(sizes: list[int], epsilons: tuple[float, ...], n_rows: int
               ) -> list[dict[str, Any]]:
    from adaptedge.trainer.methods.polydom.greedy import ALPHAS, greedy_sequences
    from adaptedge.trainer.methods.polydom.lattice import expand_lattice
    from adaptedge.trainer.methods.polydom.method import bank_accuracy
    from adaptedge.trainer.methods.polydom.synthetic import synthetic_polydom

    rows = []
    for n in sizes:
        ds = synthetic_polydom(n, n_rows=n_rows, interaction=0.9, seed=n)
        acc = cached(bank_accuracy(bank_for(ds)))
        row: dict[str, Any] = {"features": n, "naive_expand_all": 2 ** n}
        for eps in sorted(epsilons, reverse=True):  # larger epsilon expands a subset (3.9)
            row[f"polydom_eps{eps:g}"] = expand_lattice(n, acc, epsilon=eps).expanded
        costs = np.array([s.energy_mj for s in ds.sensors])
        row["greedy"] = greedy_sequences(n, acc, costs, ALPHAS).expanded
        rows.append(row)
    return rows


def index_timing(sizes: list[int], queries: int) -> list[dict[str, Any]]:
    from adaptedge.protocol.budget_index import naive_lookup
    from adaptedge.trainer.methods.polydom.index import build_index
    from adaptedge.trainer.methods.polydom.lattice import candidates, expand_lattice, set_polys

    rows = []
    for n in sizes:
        rng = np.random.default_rng(n)
        single = np.where(rng.random(n) < 0.5, rng.uniform(0.6, 0.9, n), rng.uniform(0.5, 0.55, n))

        def acc(mask: int, single: Any = single, n: int = n) -> float:
            got = sorted((single[s] for s in range(n) if mask >> s & 1), reverse=True)[:2]
            return 0.5 if not got else float(1 - np.prod([1.5 - a for a in got]) * 0.5)

        polys = np.stack([rng.uniform(0, 10, n), rng.uniform(0, 0.05, n),
                          rng.uniform(0, 5e-5, n)], 1)
        lattice = expand_lattice(n, acc, epsilon=0.01)
        cands = candidates(lattice, polys)
        cp = set_polys(cands, polys)
        ca = [lattice.accuracy[m] for m in cands]
        names = [f"m{i}" for i in range(len(cands))]
        t0 = time.perf_counter()
        index = build_index(names, cp, ca)
        build_s = time.perf_counter() - t0
        every = build_index(names, cp, ca, index_all=True)
        top = float((cp @ 1000.0 ** np.arange(cp.shape[1])).max())
        qs = list(zip(rng.uniform(1, 1000, queries).tolist(),
                      rng.uniform(0, top, queries).tolist(), strict=True))
        row: dict[str, Any] = {"features": n, "candidates": len(cands),
                               "build_seconds": round(build_s, 3),
                               "polydom_size": index.size_of_index(),
                               "index_all_size": every.size_of_index(),
                               "naive_size": len(cands)}
        models = index.models
        for name, fn in (("polydom", index.lookup), ("index_all", every.lookup),
                         ("naive", lambda s, b, m=models: naive_lookup(m, s, b))):
            times = []
            clock = time.perf_counter_ns
            for s, b in qs:
                t = clock()
                fn(s, b)
                times.append(clock() - t)
            row[f"{name}_p50_us"] = float(np.percentile(times, 50)) / 1000
            row[f"{name}_p99_us"] = float(np.percentile(times, 99)) / 1000
        rows.append(row)
    return rows


def accuracy_vs_budget(dataset: Any, budgets: list[float], fixed_sizes: list[float],
                       epsilon: float) -> dict[str, Any]:
    """Per method, per fixed size, per budget: test accuracy, mean cost, over_budget, no_model."""
    from adaptedge.trainer.export.bundle import build_bundle
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.polydom.method import (
        bank_accuracy,
        budget_index,
        greedy_graphs,
        polydom_graphs,
    )
    from adaptedge.trainer.policy.budgeted import budget_report
    from adaptedge.trainer.policy.oracle import BundleRunner

    hpc = fit_hpc(dataset, kind="auto", seed=0)
    bank = bank_for(dataset)
    acc = cached(bank_accuracy(bank))
    X, y = dataset.split("test")
    out: dict[str, Any] = {"sizes": fixed_sizes, "budgets": budgets, "methods": {}}
    for method in METHODS:
        graphs, expanded = (polydom_graphs(bank, dataset, epsilon, accuracy=acc)
                            if method == "polydom" else greedy_graphs(bank, dataset, method, acc))
        manifest, files = build_bundle(dataset, hpc, graphs, hpc_onnx=hpc.onnx_bytes())
        manifest = replace(manifest, budget_index=budget_index(method, graphs, dataset))
        runner = BundleRunner.from_files(manifest, files)
        per_size = {}
        for size in fixed_sizes:
            sizes = np.full(len(y), size)
            per_size[f"{size:g}"] = [budget_report(runner, X, y, sizes, b) for b in budgets]
        out["methods"][method] = {"expanded": expanded, "models": len(graphs),
                                  "by_size": per_size}
    return out


def real_dataset(seed: int = 0) -> Any:
    """satimage, bands as sensors, tile side n in 8..64 and energy c0 + c2 n^2 per band."""
    from adaptedge.protocol.manifest import CostWeights, SensorSpec
    from adaptedge.trainer.data.costs import at_reference_size
    from adaptedge.trainer.data.datasets import load_dataset

    ds = load_dataset("satimage", grouping="bands", seed=seed)
    rng = np.random.default_rng(seed)
    sizes = tuple(np.round(np.exp(rng.uniform(np.log(8), np.log(64), len(y)))).astype(float)
                  for y in (ds.y_train, ds.y_val, ds.y_test))
    per_pixel = (0.002, 0.004, 0.001, 0.006)  # mJ per pixel: the infrared bands cost more
    wake = (2.0, 0.5, 4.0, 1.0)
    sensors = tuple(SensorSpec(s.name, s.features, energy_mj=wake[i],
                               size_poly=(("energy_mj", (wake[i], 0.0, per_pixel[i])),))
                    for i, s in enumerate(ds.sensors))
    return replace(ds, sensors=at_reference_size(sensors, float(np.median(sizes[0]))),
                   cost_weights=CostWeights(energy_mj=1.0), sizes=sizes,
                   name="satimage-tiles",
                   description=ds.description + " Tiles of n x n pixels, n log-uniform in "
                   "8..64 (simulated); band energy = wake + per-pixel * n^2 mJ.")


def anti_monotonicity(names: tuple[str, ...]) -> dict[str, Any]:
    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.methods.polydom.lattice import naive_expand_all
    from adaptedge.trainer.methods.polydom.method import bank_accuracy

    out = {}
    for name, grouping in (n.split(":") for n in names):
        ds = load_dataset(name, grouping=grouping)
        lattice = naive_expand_all(len(ds.sensors), bank_accuracy(bank_for(ds)))
        drops = [lattice.accuracy[a] - lattice.accuracy[b]
                 for a in lattice.accuracy for b in lattice.accuracy
                 if a != b and a & b == a]
        d = np.array(drops)
        out[f"{name}:{grouping}"] = {
            "pairs": len(d), "violations": int((d > 0).sum()),
            "max_violation": float(d.max(initial=0.0)),
            "p95_violation": float(np.percentile(np.maximum(d, 0), 95))}
    return out


def check(result: dict[str, Any]) -> dict[str, Any]:
    """The issue's acceptance items, as measured."""
    acc = result["accuracy"]["methods"]
    worst_gap = min(
        p["accuracy"] - g["accuracy"]
        for size, rows in acc["polydom"]["by_size"].items()
        for other in METHODS[1:]
        for p, g in zip(rows, acc[other]["by_size"][size], strict=True))
    over = sum(r["over_budget"] for block in (result["accuracy"], result["real"])
               for m in block["methods"].values() for rows in m["by_size"].values() for r in rows)
    ten = next((r for r in result["expansions"] if r["features"] == 10), None)
    twelve = next((r for r in result["index"] if r["features"] == 12), None)
    return {"over_budget_total": over,
            "accuracy_experiment_expanded_fraction": {m: v["expanded"] / 1024
                                                      for m, v in acc.items()},
            "polydom_minus_best_greedy_min": worst_gap,
            "expanded_fraction_at_10": None if ten is None else
            {k: v / ten["naive_expand_all"] for k, v in ten.items() if k.startswith("polydom")},
            "lookup_p50_us_at_12": None if twelve is None else twelve["polydom_p50_us"]}


def plot(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["expansions"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for key in [k for k in rows[0] if k != "features"]:
        ax.plot([r["features"] for r in rows], [r[key] for r in rows], marker="o", label=key)
    ax.set(yscale="log", xlabel="features", ylabel="feature sets expanded",
           title="Lattice expansion (synthetic)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "polydom-expansions.png", dpi=110)
    plt.close(fig)
    rows = result["index"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    for key in ("polydom", "index_all", "naive"):
        a1.plot([r["features"] for r in rows], [r[f"{key}_size"] for r in rows], marker="o",
                label=key)
        a2.plot([r["features"] for r in rows], [r[f"{key}_p50_us"] for r in rows], marker="o",
                label=key)
    a1.set(yscale="log", xlabel="features", ylabel="index entries", title="Index size")
    a2.set(yscale="log", xlabel="features", ylabel="lookup p50 (µs)", title="Lookup time")
    a1.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "polydom-index.png", dpi=110)
    plt.close(fig)
    for block in ("accuracy", "real"):
        data = result[block]
        sizes = list(data["methods"]["polydom"]["by_size"])
        fig, axes = plt.subplots(1, len(sizes), figsize=(4 * len(sizes), 3.5), squeeze=False)
        for ax, size in zip(axes[0], sizes, strict=True):
            for (method, m), style in zip(data["methods"].items(), ("-", "--", ":", "-."),
                                          strict=True):
                ax.plot(data["budgets"], [r["accuracy"] for r in m["by_size"][size]],
                        marker=".", linestyle=style, label=method)
            ax.set(xscale="log", xlabel="budget (mJ)", ylabel="test accuracy",
                   title=f"{block}: size {size}")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / f"polydom-{block}.png", dpi=110)
        plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--rows", type=int, default=8000,
                        help="rows of the synthetic accuracy data (default 8000)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated parts to (re)run, merged into the JSON: {PARTS} "
                        "(none: recompute the acceptance and the plots)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from adaptedge.trainer.methods.polydom.synthetic import synthetic_polydom

    started = time.perf_counter()
    budgets = [float(b) for b in np.geomspace(5, 400, 8 if args.quick else 14)]
    parts = set(args.parts.split(","))
    path = out / "polydom.json"
    result: dict[str, Any] = json.loads(path.read_text()) if parts != set(PARTS) else {}
    runs = {
        "expansions": lambda: expansions([4, 6, 8, 10], (0.01, 0.03), args.rows),
        "index": lambda: index_timing([6, 8, 10, 12], 5000 if args.quick else 20000),
        "accuracy": lambda: accuracy_vs_budget(
            synthetic_polydom(10, n_rows=args.rows, interaction=0.9, seed=10),
            budgets, [100.0, 500.0, 1000.0], 0.01),
        "real": lambda: accuracy_vs_budget(
            real_dataset(), [float(b) for b in np.geomspace(1, 120, 10)], [8.0, 24.0, 64.0],
            0.01),
        "anti_monotonicity": lambda: anti_monotonicity(("satimage:bands", "letter:4x4")),
    }
    for part in PARTS:
        if part in parts:
            result[part] = runs[part]()
    result["acceptance"] = check(result)
    if parts & set(PARTS):
        result["seconds"] = round(time.perf_counter() - started, 1)
    for part in ("accuracy", "expansions"):
        if part in parts:
            result[f"{part}_rows"] = args.rows
    path.write_text(json.dumps(result, indent=2))
    plot(result, out)
    print(json.dumps({k: result[k] for k in ("acceptance", "expansions", "index",
                                             "anti_monotonicity", "seconds")}, indent=2))
    return result


if __name__ == "__main__":
    main()
