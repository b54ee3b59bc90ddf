"""CPU milliseconds per cost-penalised tree (``trainer.methods.cart.grow_tree``); prints JSON.

    python -m benchmarks.cart_trees [--rows N] [--trees T] [--seed S]

A **toy**: Gaussian features (16 and 128 of them, 64 bins), a residual carried by three
features, unit sensor costs, depth 5, 40 rows a leaf. Per width: ``all_features_ms`` (every
feature may split, as in ADAPT-GBRT's growth rounds) and ``allowed_16_ms`` (only 16 features
may split, as in a refinement round that bought 16), each the median over the trees of one
process's CPU time per tree. What it shows: the cost of a tree follows the features that may
split, not the features the data has.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import numpy as np


def per_tree_ms(n_rows: int, n_features: int, allowed: int | None, trees: int,
                seed: int) -> float:
    """Median CPU milliseconds of ``trees`` trees grown on one binned toy set."""
    from adaptedge.trainer.methods.cart import BinMapper, BinnedRows, TreeParams, grow_tree

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    residual = (X[:, :3].sum(axis=1) + rng.normal(size=n_rows))[:, None]
    binner = BinMapper.fit(X, 64)
    codes = binner.transform(X)
    rows = BinnedRows.of(codes, binner)
    mask = None if allowed is None else np.arange(n_features) < allowed
    params = TreeParams(max_depth=5, min_samples_leaf=40, gamma=1e-3)
    times = []
    for _ in range(trees):
        started = time.process_time()
        grow_tree(codes, binner, residual, np.ones_like(residual), params,
                  np.ones(n_features), np.arange(n_features), np.zeros(n_features, bool),
                  mask, rows)
        times.append((time.process_time() - started) * 1000)
    return round(statistics.median(times), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--trees", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out: dict[str, Any] = {"toy": True, "rows": args.rows, "trees": args.trees,
                           "seed": args.seed, "load_before": os.getloadavg()[0]}
    for width in (16, 128):
        out[f"features_{width}"] = {
            "all_features_ms": per_tree_ms(args.rows, width, None, args.trees, args.seed),
            "allowed_16_ms": per_tree_ms(args.rows, width, 16, args.trees, args.seed),
        }
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
