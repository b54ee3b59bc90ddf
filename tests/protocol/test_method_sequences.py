"""``protocol.method_sequences``: per-method fixed sequences under weighted Bonferroni (issue
36). A method whose cheap points are good is certified even when another method's point above
them fails (the one merged sequence stops there); the shares are fixed on the selection rows
and sum to the alpha; a front from one method is exactly today's one fixed sequence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from adaptedge.protocol.method_sequences import (
    ALPHA,
    alpha_shares,
    cheapest_certified,
    method_sequences,
    sequences_record,
)
from adaptedge.protocol.operating_points import PairedCounts, certified_near, paired_lower_bound


@dataclass(frozen=True)
class P:
    accuracy: float
    cost: float


GOOD = PairedCounts(both=1940, point_only=30, hpc_only=30, neither=0)  # 2,000 rows, even
BAD = PairedCounts(both=1900, point_only=10, hpc_only=90, neither=0)  # 4% worse


def test_a_good_cheap_method_is_certified_below_another_methods_failure() -> None:
    """Costs 5 (cascade, passes), 4 (cegb, fails), 3 and 2 (dag, pass): the merged sequence
    stops at cegb's 4 and certifies only 5; the dag's own sequence reaches 2."""
    points = [P(0.97, 5.0), P(0.95, 4.0), P(0.97, 3.0), P(0.97, 2.0)]
    methods = ["confidence", "cegb", "dag", "dag"]
    counts = [GOOD, BAD, GOOD, GOOD]
    merged = certified_near(points, [c.lower_bound for c in counts], 0.01, fallback=False)
    assert merged == 0
    shares = alpha_shares(points, methods, 0.97, 0.01)
    assert shares == pytest.approx({"dag": ALPHA / 2, "confidence": ALPHA / 2, "cegb": 0.0})
    sequences = method_sequences(points, counts, methods, shares, 0.01)
    found = cheapest_certified(points, sequences)
    assert found is not None and found[0] == 3 and found[1].method == "dag"
    assert [s.passed for s in sequences] == [1, 0, 2]
    dag = sequences[2]
    assert dag.order == (2, 3)  # most expensive first
    # the cascade's one point passed: its 0.0125 went on to the dag (cegb's share is 0)
    assert dag.alpha == ALPHA / 2 and dag.levels == (ALPHA, ALPHA)
    assert dag.bounds[0] == pytest.approx(paired_lower_bound(30, 30, 2000, alpha=ALPHA))
    assert sequences[1].bounds == (None,) and sequences[1].levels == (0.0,)  # never tested
    record = sequences_record(sequences, ["c5", "e4", "d3", "d2"], 0.01)
    assert record["alpha"] == pytest.approx(ALPHA)
    assert record["methods"]["dag"] == {"alpha": ALPHA / 2, "points": ["d3", "d2"],  # type: ignore[index]
                                        "levels": [ALPHA, ALPHA], "bounds": list(dag.bounds),
                                        "passed": 2}


def test_a_finished_sequence_hands_its_level_on() -> None:
    """Two methods at 0.0125 each. b's first point is bounded at -0.0090 at the full 0.025
    but below -0.01 at 0.0125: alone at its share it fails; once a's only point passes, a's
    share goes to b and b's point passes at 0.025 (the graphical procedure). When a's point
    fails, nothing moves and b fails."""
    near = PairedCounts(both=1920, point_only=40, hpc_only=40, neither=0)
    at_full = paired_lower_bound(40, 40, 2000)
    assert at_full >= -0.01 and paired_lower_bound(40, 40, 2000, alpha=ALPHA / 2) < -0.01
    points, methods = [P(0.97, 3.0), P(0.97, 2.0)], ["a", "b"]
    shares = {"a": ALPHA / 2, "b": ALPHA / 2}
    found = cheapest_certified(points, method_sequences(points, [GOOD, near], methods,
                                                        shares, 0.01))
    assert found is not None and found[0] == 1 and found[1].levels == (ALPHA,)
    stuck = method_sequences(points, [BAD, near], methods, shares, 0.01)
    assert cheapest_certified(points, stuck) is None
    assert [s.levels for s in stuck] == [(ALPHA / 2,), (ALPHA / 2,)]
    zero = method_sequences(points, [GOOD, near], methods, {"a": ALPHA, "b": 0.0}, 0.01)
    assert zero[1].bounds == (None,)  # share 0: never handed anything, never tested


def test_a_bad_method_fails_alone_and_nothing_bad_is_certified() -> None:
    points = [P(0.97, 3.0), P(0.95, 2.0), P(0.95, 1.0)]
    methods = ["a", "b", "b"]
    shares = alpha_shares(points, methods, 0.97, 0.01)
    sequences = method_sequences(points, [BAD, BAD, GOOD], methods, shares, 0.01)
    assert cheapest_certified(points, sequences) is None  # b's good cheap point sits behind


def test_shares_are_fixed_on_selection_figures_and_sum_to_alpha() -> None:
    methods = ["a", "b", "c", "a"]
    # screened (>= 0.9 - 0.005): a's cost-4 point, b's cost-2 point, c's cost-3 point
    points = [P(0.90, 4.0), P(0.899, 2.0), P(0.896, 3.0), P(0.80, 1.0)]
    shares = alpha_shares(points, methods, 0.90, 0.01)
    assert shares == pytest.approx({"a": ALPHA / 4, "b": ALPHA / 2, "c": ALPHA / 4})
    assert sum(shares.values()) == pytest.approx(ALPHA)
    none_screened = alpha_shares(points, methods, 0.99, 0.01)
    assert none_screened == pytest.approx({"a": ALPHA / 3, "b": ALPHA / 3, "c": ALPHA / 3})
    only_leader = alpha_shares(points, methods, 0.9045, 0.01)  # only a 0.90 is within 0.005
    assert only_leader == {"a": ALPHA, "b": 0.0, "c": 0.0}
    assert alpha_shares(points[:1], ["a"], 0.99, 0.01) == {"a": ALPHA}
    with pytest.raises(ValueError, match="2 methods for 1 points"):
        alpha_shares(points[:1], ["a", "b"], 0.9, 0.01)


def test_one_method_is_exactly_the_one_fixed_sequence() -> None:
    """Seeded random fronts of one method (or of unrecorded methods): the per-method rule
    certifies the same point as ``certified_near`` at the whole alpha."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        k = int(rng.integers(1, 8))
        points = [P(0.9, float(c)) for c in rng.permutation(k) + 1]
        counts = [PairedCounts(300, int(b), int(c), 0)
                  for b, c in rng.integers(0, 12, size=(k, 2))]
        for methods in (["m"] * k, [None] * k):
            shares = alpha_shares(points, methods, 0.9, 0.01)
            found = cheapest_certified(points, method_sequences(points, counts, methods,
                                                                shares, 0.01))
            expected = certified_near(points, [c.lower_bound for c in counts], 0.01,
                                      fallback=False)
            assert (None if found is None else found[0]) == expected
