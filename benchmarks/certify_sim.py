"""How often each certifying rule certifies a point that is truly worse than the HPC by more
than the tolerance, by simulation; prints one JSON object.

    python -m benchmarks.certify_sim [--trials 400] [--seed 0]

Each trial draws a validation set of ``n`` rows for ``k`` candidate points with distinct,
fixed costs: the ``good`` most expensive are truly as accurate as the HPC, every other point
truly ``tolerance + gap`` worse (2% of rows only the HPC gets right; 2% - 1% - gap only the
point). Per point the paired counts are drawn independently (multinomial). Rules, all at
tolerance 0.01 and one-sided 97.5%: ``per_point`` (the cheapest point whose own paired bound
passes: the rule before fixed-sequence testing), ``sequence_list`` (``certified_near``: the
points tested from the most expensive down, stop at the first failure, on the fixed list) and
``sequence_front`` (the same, on the list's validation Pareto front: the list chosen with the
labels the bounds are measured on, as a trained front is). Reported: the share of trials
that certified a truly worse point (the family-wise false-certification rate; the target is
<= 0.025).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from adaptedge.protocol.operating_points import certified_near, paired_lower_bound, pareto_front

SETTINGS = ({"n": 400, "k": 40, "gap": 0.002, "good": 0},
            {"n": 400, "k": 40, "gap": 0.002, "good": 5},
            {"n": 400, "k": 10, "gap": 0.002, "good": 0},
            {"n": 4000, "k": 40, "gap": 0.002, "good": 5})


class _Point:
    def __init__(self, accuracy: float, cost: float) -> None:
        self.accuracy, self.cost = accuracy, cost


def trial(rng: np.random.Generator, n: int, k: int, gap: float, good: int) -> dict[str, bool]:
    """One validation draw: whether each rule certified a truly worse point."""
    worse = [i >= good for i in range(k)]
    points, bounds = [], []
    for i in range(k):
        point_only = 0.02 - (0.01 + gap if worse[i] else 0.0)
        b, c, _ = rng.multinomial(n, [point_only, 0.02, 1 - point_only - 0.02])
        points.append(_Point(0.97 + (b - c) / n, float(k - i)))
        bounds.append(paired_lower_bound(int(b), int(c), n))
    out = {}
    for rule, sequential in (("per_point", False), ("sequence_list", True)):
        i = certified_near(points, bounds, 0.01, fallback=False, sequential=sequential)
        out[rule] = i is not None and worse[i]
    front = pareto_front(points)
    j = certified_near([points[i] for i in front], [bounds[i] for i in front], 0.01,
                       fallback=False)
    out["sequence_front"] = j is not None and worse[front[j]]
    return out


def run(trials: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for setting in SETTINGS:
        counts = dict.fromkeys(("per_point", "sequence_list", "sequence_front"), 0)
        for _ in range(trials):
            for rule, bad in trial(rng, **setting).items():
                counts[rule] += bad
        rows.append({**setting, "trials": trials,
                     "false_certification_rate": {r: c / trials for r, c in counts.items()}})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(json.dumps({"trials": args.trials, "seed": args.seed,
                      "settings": run(args.trials, args.seed)}, indent=1))


if __name__ == "__main__":
    main()
