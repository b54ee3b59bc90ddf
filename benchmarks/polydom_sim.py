"""PolyDom's §6 simulation as the paper sets it up (Indexing Cost Sensitive Prediction): drawn
feature accuracies and cost polynomials (``trainer.methods.polydom.simulation``), no models.

1. ``expansions``: feature sets expanded vs number of features (1..``--max-features``), for the
   combiner's extremes k = 1 and k = n: PolyDom (Algorithm 2: sandwich and covering pruning)
   at each epsilon, PolyDom with the sandwich property alone (``sandwich_eps*``), Greedy (all
   alphas), NaiveExpandAll (2^n); mean over seeds, and PolyDom's count per seed at 10 features.
2. ``index``: index size (stored entries: breaks + skyline slots) and retrieval time (p50 µs per
   (size, budget) query, one process) of PolyDom (Algorithm 3's sweep), PolyDomIndexAll (every
   crossing) and NaiveLookup (a scan of the candidates), with the adjacent swaps Algorithm 3
   popped and the distinct crossing sizes of all pairs (what PolyDomIndexAll stores).
3. ``accuracy``: accuracy of the set each method retrieves vs budget at fixed item sizes, for
   PolyDom (candidates at epsilon 0: exact), Greedy, GreedyAcc and GreedyCost; mean over seeds,
   and each method's mean over the budget grid (the ordering checked in ``check``).

Prints one JSON object; writes ``polydom_sim.json`` and ``polydom-sim-*.png`` into ``--out``.
Run: ``python -m benchmarks.polydom_sim [--quick] [--seeds 5] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

EPSILONS = (0.0, 0.01, 0.05, 0.1)
SANDWICH_ONLY = (0.0, 0.05)
VARIANTS = {"greedy": None, "greedy-acc": (0.0,), "greedy-cost": (math.inf,)}


def expansions(max_n: int, seeds: int) -> dict[str, Any]:
    from adaptedge.trainer.methods.polydom.greedy import greedy_sequences
    from adaptedge.trainer.methods.polydom.lattice import expand_lattice
    from adaptedge.trainer.methods.polydom.simulation import TRAIN_SIZE, simulate

    out: dict[str, Any] = {}
    for label in ("k=1", "k=n"):
        rows = []
        for n in range(1, max_n + 1):
            row: dict[str, Any] = {"features": n, "naive_expand_all": 2 ** n}
            worlds = [simulate(n, k=1 if label == "k=1" else n, seed=s) for s in range(seeds)]
            for eps in EPSILONS:
                got = [expand_lattice(n, w.accuracy, epsilon=eps, covering=True).expanded
                       for w in worlds]
                row[f"polydom_eps{eps:g}"] = float(np.mean(got))
                if n == 10:
                    row[f"per_seed_eps{eps:g}"] = got
            for eps in SANDWICH_ONLY:
                row[f"sandwich_eps{eps:g}"] = float(np.mean(
                    [expand_lattice(n, w.accuracy, epsilon=eps).expanded for w in worlds]))
            row["greedy"] = float(np.mean(
                [greedy_sequences(n, w.accuracy, w.feature_costs(TRAIN_SIZE)).expanded
                 for w in worlds]))
            rows.append(row)
        out[label] = rows
    return out


def index_rows(features: list[int], seeds: int, queries: int) -> list[dict[str, Any]]:
    from adaptedge.protocol.budget_index import naive_lookup
    from adaptedge.trainer.methods.polydom.index import build_index, sweep
    from adaptedge.trainer.methods.polydom.lattice import candidates, expand_lattice, set_polys
    from adaptedge.trainer.methods.polydom.simulation import SIZES, simulate

    rows = []
    for n in features:
        acc_rows: list[dict[str, float]] = []
        for seed in range(seeds):
            w = simulate(n, k=2, seed=seed)
            lattice = expand_lattice(n, w.accuracy, epsilon=0.0, covering=True)
            cands = candidates(lattice, w.polys)
            cp, ca = set_polys(cands, w.polys), [lattice.accuracy[m] for m in cands]
            names = [f"m{i}" for i in range(len(cands))]
            index, every = build_index(names, cp, ca), build_index(names, cp, ca, index_all=True)
            popped = sweep(cp, np.asarray(ca))[2]
            rng = np.random.default_rng(seed)
            top = float((cp @ SIZES[1] ** np.arange(3)).max())
            qs = list(zip(rng.uniform(*SIZES, queries).tolist(),
                          rng.uniform(0, top, queries).tolist(), strict=True))
            row = {"candidates": len(cands), "polydom_size": index.size_of_index(),
                   "index_all_size": every.size_of_index(), "naive_size": len(cands),
                   "swaps_popped": popped, "crossing_sizes_all": len(every.breaks)}
            for name, fn in (("polydom", index.lookup), ("index_all", every.lookup),
                             ("naive", lambda s, b, m=index.models: naive_lookup(m, s, b))):
                times = []
                for s, b in qs:
                    t = time.perf_counter_ns()
                    fn(s, b)
                    times.append(time.perf_counter_ns() - t)
                row[f"{name}_p50_us"] = float(np.percentile(times, 50)) / 1000
            acc_rows.append(row)
        rows.append({"features": n, **{k: float(np.mean([r[k] for r in acc_rows]))
                                       for k in acc_rows[0]}})
    return rows


def accuracy_vs_budget(n: int, seeds: int, sizes: tuple[float, ...], budgets: list[float]
                       ) -> dict[str, Any]:
    from adaptedge.trainer.methods.polydom.greedy import ALPHAS, greedy_sequences
    from adaptedge.trainer.methods.polydom.lattice import candidates, expand_lattice
    from adaptedge.trainer.methods.polydom.simulation import (
        TRAIN_SIZE,
        greedy_pick,
        polydom_pick,
        simulate,
    )

    out: dict[str, Any] = {}
    for label in ("k=1", "k=n"):
        for size in sizes:
            curves: dict[str, list[list[float]]] = {m: [] for m in ("polydom", *VARIANTS)}
            for seed in range(seeds):
                w = simulate(n, k=1 if label == "k=1" else n, seed=seed)
                cands = candidates(expand_lattice(n, w.accuracy, epsilon=0.0, covering=True),
                                   w.polys)
                curves["polydom"].append([polydom_pick(w, cands, size, b) for b in budgets])
                for name, alphas in VARIANTS.items():
                    g = greedy_sequences(n, w.accuracy, w.feature_costs(TRAIN_SIZE),
                                         ALPHAS if alphas is None else alphas)
                    curves[name].append([greedy_pick(w, g, size, b) for b in budgets])
            out[f"{label} size={size:g}"] = {
                m: {"accuracy": np.mean(c, axis=0).round(4).tolist(),
                    "mean_over_budgets": float(np.mean(c))} for m, c in curves.items()}
    return {"features": n, "budgets": budgets, "curves": out}


def check(result: dict[str, Any]) -> dict[str, Any]:
    """The acceptance: expansions at 10 features within a factor of 2 of the paper's figure
    (k = 1: about 50 for PolyDom at its smaller epsilon, about 30 at its larger); the ordering
    PolyDom >= Greedy >= GreedyAcc >= GreedyCost of each curve's mean over budgets."""
    out: dict[str, Any] = {}
    rows = {r["features"]: r for r in result["expansions"]["k=1"]}
    if 10 in rows:
        got = {f"eps{e:g}": rows[10][f"polydom_eps{e:g}"] for e in EPSILONS}
        out["expansions_10_features_k1"] = got
        out["within_2x_of_50"] = {k: 25 <= v <= 100 for k, v in got.items()}
        out["within_2x_of_30"] = {k: 15 <= v <= 60 for k, v in got.items()}
    order = {}
    for name, curves in result["accuracy"]["curves"].items():
        m = [curves[k]["mean_over_budgets"] for k in ("polydom", "greedy", "greedy-acc",
                                                      "greedy-cost")]
        order[name] = {"means": [round(v, 4) for v in m],
                       "ordered": all(a >= b - 1e-12 for a, b in itertools.pairwise(m))}
    out["accuracy_ordering"] = order
    return out


def plot(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (label, rows) in zip(axes, result["expansions"].items(), strict=True):
        xs = [r["features"] for r in rows]
        for key in [k for k in rows[0] if k != "features" and not k.startswith("per_seed")]:
            ax.semilogy(xs, [r[key] for r in rows], marker="o", ms=3, label=key)
        ax.set_title(f"feature sets expanded ({label})")
        ax.set_xlabel("number of features")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "polydom-sim-expansions.png", dpi=110)
    plt.close(fig)
    rows = result["index"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    xs = [r["features"] for r in rows]
    for key in ("polydom_size", "index_all_size", "naive_size"):
        axes[0].plot(xs, [r[key] for r in rows], marker="o", ms=3, label=key)
    for key in ("polydom_p50_us", "index_all_p50_us", "naive_p50_us"):
        axes[1].plot(xs, [r[key] for r in rows], marker="o", ms=3, label=key)
    axes[0].set_title("index size (entries)")
    axes[1].set_title("retrieval time p50 (µs)")
    for ax in axes:
        ax.set_xlabel("number of features")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "polydom-sim-index.png", dpi=110)
    plt.close(fig)
    acc = result["accuracy"]
    names = list(acc["curves"])
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        for m, c in acc["curves"][name].items():
            ax.plot(acc["budgets"], c["accuracy"], marker=".", ms=3, label=m)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("budget")
        ax.set_ylabel("accuracy")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "polydom-sim-accuracy.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer features, seeds, queries")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--max-features", type=int, default=12)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    seeds = 2 if args.quick else args.seeds
    max_n = min(args.max_features, 8) if args.quick else args.max_features
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started, load = time.perf_counter(), os.getloadavg()[0]
    budgets = [float(b) for b in np.linspace(0, 6000, 25)]
    result: dict[str, Any] = {
        "seeds": seeds, "load_average_1min_before": load,
        "expansions": expansions(max_n, seeds),
        "index": index_rows([n for n in (4, 6, 8, 10, 12) if n <= max_n], seeds,
                            200 if args.quick else 2000),
        "accuracy": accuracy_vs_budget(min(10, max_n), seeds, (50.0, 100.0), budgets),
    }
    result["check"] = check(result)
    result["seconds"] = time.perf_counter() - started
    result["load_average_1min_after"] = os.getloadavg()[0]
    (out / "polydom_sim.json").write_text(json.dumps(result, indent=1))
    plot(result, out)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
