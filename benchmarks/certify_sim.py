"""How often each certifying rule certifies a point that is truly worse than the HPC by more
than the tolerance (false certification), and how often and how cheaply it certifies a point
when good points exist (power), by simulation; prints one JSON object.

    python -m benchmarks.certify_sim [--trials 400] [--seed 0]

Each trial draws a validation set of ``n`` rows for ``k`` candidate points with distinct,
fixed costs ``k, k - 1, ..., 1`` (the HPC costs ``k + 1``). Point ``i`` has a true accuracy
difference from the HPC ``d_i`` (its ``profile``): 2% of rows only the HPC gets right and
2% + ``d_i`` only the point; a point is *bad* when ``d_i < -0.01`` (the tolerance). Per point
the paired counts are drawn independently (multinomial), on a selection part A
(``1 - fraction`` of the rows) and a certify part B (``fraction``); the full set is A + B.
Profiles: ``null`` (the ``good`` most expensive points have d = 0, every other d = -0.012),
``mixed`` (a quarter each: +0.002, 0, -0.005, -0.02, from the most expensive down).

Rules, all at tolerance 0.01 and one-sided 97.5% (family-wise):
``per_point``: the cheapest point whose own bound on the full set passes (the rule before
fixed-sequence testing). ``sequence_front``: the full set's validation Pareto front tested
from the most expensive down, stop at the first failure (the rule on main: the list is chosen
with the labels the bounds use). ``split``: the front on A, tested in fixed sequence (by cost)
on B. ``split_screened``: as ``split``, but only the A-front points whose A difference is
>= -tolerance / 2 are tested (a list chosen on A alone, so still valid; fewer early stops).
``labelfree``: every point (no front) in fixed sequence by cost on the full set: valid only
when the candidate list and the points themselves used no validation labels.
``labelfree_bonferroni``: the points split into ``methods`` interleaved per-method lists, each
its own fixed sequence at alpha / methods on the full set, the cheapest certified of any.
``split_per_method``: the trainer's rule for fronts from several methods (``--method auto``,
``protocol.method_sequences``): point ``i`` belongs to method ``i % methods``; the A-front's
points of each method are tested in their own fixed sequence on B at that method's alpha
share (``alpha_shares`` on A: half to the method of the cheapest A-screened point, half
shared by the other screened methods), the cheapest certified of any.
Profile ``methods``: method 0's points are all truly +0.3% (good at every cost); the other
methods' points are ``mixed`` (good when expensive, borderline then bad when cheap: one
merged sequence stops at the first of them that fails; per method, method 0 goes on).
Reported per rule: ``false`` (share of trials certifying a bad point; target <= 0.025),
``certified`` (share certifying any point), ``cost_reduction`` (mean of 1 - cost / HPC cost
of the certified point over the trials that certified one), ``expected_reduction`` (the same
over every trial, 0 when nothing is certified: what a user gets on average).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from adaptedge.protocol.method_sequences import alpha_shares, cheapest_certified, method_sequences
from adaptedge.protocol.operating_points import (
    PairedCounts,
    certified_near,
    paired_lower_bound,
    pareto_front,
)

TOLERANCE = 0.01
RULES = ("per_point", "sequence_front", "split", "split_screened", "labelfree",
         "labelfree_bonferroni", "split_per_method")
SETTINGS = ({"n": 400, "k": 40, "profile": "null", "good": 0},
            {"n": 400, "k": 40, "profile": "null", "good": 5},
            {"n": 4000, "k": 40, "profile": "null", "good": 5},
            {"n": 360, "k": 40, "profile": "mixed", "good": 0},
            {"n": 1000, "k": 40, "profile": "mixed", "good": 0},
            {"n": 4000, "k": 40, "profile": "mixed", "good": 0},
            {"n": 400, "k": 40, "profile": "methods", "good": 0},
            {"n": 1000, "k": 40, "profile": "methods", "good": 0},
            {"n": 4000, "k": 40, "profile": "methods", "good": 0})


class _Point:
    def __init__(self, accuracy: float, cost: float) -> None:
        self.accuracy, self.cost = accuracy, cost


class _Draw:
    """One part's paired counts: per point (rows only the point right, only the HPC right)."""

    def __init__(self, rng: np.random.Generator, n: int, diffs: Sequence[float]) -> None:
        self.n = n
        self.counts = [rng.multinomial(n, [0.02 + d, 0.02, 0.96 - d])[:2] for d in diffs]

    def plus(self, other: _Draw) -> _Draw:
        out = object.__new__(_Draw)
        out.n = self.n + other.n
        out.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        return out

    def points(self, k: int) -> list[_Point]:
        return [_Point(0.97 + (b - c) / max(self.n, 1), float(k - i))
                for i, (b, c) in enumerate(self.counts)]

    def bounds(self, alpha: float = 0.025) -> list[float | None]:
        return [paired_lower_bound(int(b), int(c), self.n, alpha=alpha) for b, c in self.counts]


def profile(name: str, k: int, good: int, methods: int = 4) -> list[float]:
    """Each point's true accuracy difference from the HPC, the most expensive first (point
    ``i`` of method ``i % methods``)."""
    if name == "null":
        return [0.0 if i < good else -TOLERANCE - 0.002 for i in range(k)]
    mixed = [(0.002, 0.0, -0.005, -0.02)[min(4 * i // k, 3)] for i in range(k)]
    if name == "methods":
        return [0.003 if i % methods == 0 else mixed[i] for i in range(k)]
    return mixed


def _sequence(points: list[_Point], bounds: list[float | None], keep: list[int]) -> int | None:
    j = certified_near([points[i] for i in keep], [bounds[i] for i in keep], TOLERANCE,
                       fallback=False)
    return None if j is None else keep[j]


def picks(a: _Draw, b: _Draw, k: int, methods: int) -> dict[str, int | None]:
    """The point each rule of ``RULES`` certifies (``None``: none)."""
    full = a.plus(b)
    pts, bounds = full.points(k), full.bounds()
    on_a, on_b, b_bounds = a.points(k), b.points(k), b.bounds()
    front_a = pareto_front(on_a)
    screened = [i for i in front_a if on_a[i].accuracy - 0.97 >= -TOLERANCE / 2]
    out = {"per_point": certified_near(pts, bounds, TOLERANCE, fallback=False,
                                       sequential=False),
           "sequence_front": _sequence(pts, bounds, pareto_front(pts)),
           "split": _sequence(on_b, b_bounds, front_a),
           "split_screened": _sequence(on_b, b_bounds, screened),
           "labelfree": _sequence(pts, bounds, list(range(k)))}
    shared = full.bounds(0.025 / methods)
    each = [_sequence(pts, shared, list(range(m, k, methods))) for m in range(methods)]
    passed = [i for i in each if i is not None]
    out["labelfree_bonferroni"] = max(passed) if passed else None  # the cheapest: highest i
    out["split_per_method"] = per_method(on_a, on_b, b, front_a, methods)
    return out


def per_method(on_a: list[_Point], on_b: list[_Point], b: _Draw, front: list[int],
               methods: int) -> int | None:
    """``split_per_method``: the A-front's points, each of method ``i % methods``, shares
    fixed on A (the HPC's accuracy is 0.97 by construction), sequences on B's counts."""
    names = [f"m{i % methods}" for i in front]
    shares = alpha_shares([on_a[i] for i in front], names, 0.97, TOLERANCE)
    counts = [PairedCounts(b.n - int(b.counts[i][0]) - int(b.counts[i][1]),
                           int(b.counts[i][0]), int(b.counts[i][1]), 0) for i in front]
    costs = [on_b[i] for i in front]
    found = cheapest_certified(costs, method_sequences(costs, counts, names, shares, TOLERANCE))
    return None if found is None else front[found[0]]


def run_setting(rng: np.random.Generator, trials: int, n: int, k: int, profile_name: str,
                good: int, fraction: float, methods: int) -> dict[str, Any]:
    """Every rule's rates over ``trials`` draws of one setting."""
    diffs = profile(profile_name, k, good, methods)
    n_b = round(fraction * n)
    tally: dict[str, list[float]] = {r: [0.0, 0.0] for r in RULES}
    reductions: dict[str, list[float]] = {r: [] for r in RULES}
    for _ in range(trials):
        for rule, i in picks(_Draw(rng, n - n_b, diffs), _Draw(rng, n_b, diffs), k,
                             methods).items():
            if i is not None:
                tally[rule][0] += diffs[i] < -TOLERANCE
                tally[rule][1] += 1
                reductions[rule].append(1 - (k - i) / (k + 1))
    return {"n": n, "k": k, "profile": profile_name, "good": good, "trials": trials,
            "rules": {r: {"false": tally[r][0] / trials, "certified": tally[r][1] / trials,
                          "cost_reduction": (round(float(np.mean(reductions[r])), 4)
                                             if reductions[r] else None),
                          "expected_reduction": round(sum(reductions[r]) / trials, 4)}
                      for r in RULES}}


def run(trials: int, seed: int, fraction: float = 0.5, methods: int = 4,
        settings: Sequence[dict[str, Any]] = SETTINGS) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [run_setting(rng, trials, s["n"], s["k"], s["profile"], s["good"], fraction,
                        methods) for s in settings]


def main(argv: Sequence[str] | None = None,
         out: Callable[[str], None] = print) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fraction", type=float, default=0.5,
                    help="the certify part's share of the validation rows (split rules)")
    ap.add_argument("--methods", type=int, default=4,
                    help="per-method lists of labelfree_bonferroni")
    args = ap.parse_args(argv)
    out(json.dumps({"trials": args.trials, "seed": args.seed, "fraction": args.fraction,
                    "methods": args.methods,
                    "settings": run(args.trials, args.seed, args.fraction, args.methods)},
                   indent=1))


if __name__ == "__main__":
    main()
