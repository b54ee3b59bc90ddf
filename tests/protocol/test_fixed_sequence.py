"""Fixed-sequence testing of the paired bounds (``protocol.operating_points.fixed_sequence``,
issue 36): the default point is certified only if every more expensive point passed too, so
choosing among many candidate points does not inflate the chance of a false certification."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.protocol.operating_points import (
    PairedCounts,
    certified_near,
    confidently_near,
    fixed_sequence,
    paired_lower_bound,
)


class P:
    def __init__(self, accuracy: float, cost: float) -> None:
        self.accuracy, self.cost = accuracy, cost


def test_the_sequence_runs_from_the_most_expensive_point_and_stops_at_the_first_failure() -> None:
    pts = [P(0.90, 1.0), P(0.96, 2.0), P(0.97, 3.0), P(0.98, 4.0), P(0.99, 5.0)]
    bounds: list[float | None] = [0.0, -0.02, -0.005, -0.001, 0.0]
    assert fixed_sequence(pts, bounds, 0.01) == [4, 3, 2]  # stops at the 2.0 point
    assert certified_near(pts, bounds, 0.01) == 2  # the cheapest passed; not the lucky 1.0
    assert certified_near(pts, bounds, 0.01, sequential=False) == 0
    # any order fixed before the labels; ties keep the earlier point first
    assert fixed_sequence(pts, bounds, 0.01, order=[5, 4, 3, 2, 1]) == [0]
    assert fixed_sequence(pts, [0.0] * 5, 0.01, order=[1, 1, 1, 1, 1]) == [0, 1, 2, 3, 4]
    assert fixed_sequence(pts, [None, 0.0, 0.0, 0.0, -0.5], 0.01) == []
    assert certified_near(pts, [None, 0.0, 0.0, 0.0, -0.5], 0.01) == 4  # most accurate
    assert fixed_sequence([], [], 0.01) == []
    with pytest.raises(ValueError, match="3 order keys for 5 points"):
        fixed_sequence(pts, bounds, 0.01, order=[1.0, 2.0, 3.0])


def test_the_sequence_certifies_where_the_marginal_rule_cannot() -> None:
    """300 validation rows, HPC right on 294: two points agreeing with the HPC on all but 2
    rows (both of which they get right) pass in sequence; the marginal rule passes neither."""
    counts = PairedCounts(both=294, point_only=2, hpc_only=0, neither=4)
    accuracy = (counts.both + counts.point_only) / counts.n
    pts = [P(accuracy, 3.0), P(accuracy, 5.0)]
    assert confidently_near(pts, 0.98, 0.01, 300, fallback=False) is None
    assert certified_near(pts, [counts.lower_bound] * 2, 0.01, fallback=False) == 0


def test_the_sequence_refuses_a_clearly_worse_policy() -> None:
    """2,000 rows, 2% worse than the HPC: refused, and it ends the sequence so no cheaper
    point after it is certified either, however good its own bound looks."""
    worse = PairedCounts(both=1900, point_only=10, hpc_only=50, neither=40)
    lucky = PairedCounts(both=1940, point_only=10, hpc_only=10, neither=40)
    pts = [P(0.97, 1.0), P(0.955, 2.0)]
    assert certified_near(pts, [lucky.lower_bound, worse.lower_bound], 0.01,
                          fallback=False) is None
    assert certified_near(pts, [lucky.lower_bound, worse.lower_bound], 0.01,
                          fallback=False, sequential=False) == 0


def _false_certifications(rng: np.random.Generator, n: int, k: int, gap: float,
                          trials: int) -> tuple[float, float]:
    """How often each rule certifies one of ``k`` independent points that are all truly
    ``gap`` worse than the HPC (one-by-one, in sequence), over ``trials`` validation draws of
    ``n`` rows: rows only the HPC gets right 2%, only the point 2% - ``gap``."""
    one_by_one = in_sequence = 0
    pts = [P(0.97, float(k - i)) for i in range(k)]
    for _ in range(trials):
        draws = rng.multinomial(n, [0.02 - gap, 0.02, 0.96 + gap], size=k)
        bounds: list[float | None] = [paired_lower_bound(int(b), int(c), n)
                                      for b, c, _ in draws]
        one_by_one += certified_near(pts, bounds, 0.01, fallback=False,
                                     sequential=False) is not None
        in_sequence += certified_near(pts, bounds, 0.01, fallback=False) is not None
    return one_by_one / trials, in_sequence / trials


@pytest.mark.slow
def test_the_family_wise_false_certification_rate_holds_by_simulation() -> None:
    """20 null points, every one truly 1.2% worse than the HPC (tolerance 1%), 400 rows:
    certifying the cheapest point that passes on its own bound certifies a bad point far more
    often than 2.5%; the fixed sequence stays within 2.5% plus three binomial standard errors
    (fixed seed: the same draws every run)."""
    trials = 300
    one_by_one, in_sequence = _false_certifications(np.random.default_rng(36), 400, 20,
                                                    0.012, trials)
    noise = 3 * np.sqrt(0.025 * 0.975 / trials)
    assert in_sequence <= 0.025 + noise
    assert one_by_one > 0.025 + noise


def test_the_bound_takes_another_level_for_bonferroni_shares() -> None:
    """``alpha``: a one-sided level other than 2.5% (e.g. 2.5% / M for M per-method lists):
    the default is 2.5%, a smaller alpha gives a lower bound, and a level outside (0, 0.5) is
    refused."""
    assert paired_lower_bound(3, 1, 400, alpha=0.025) == paired_lower_bound(3, 1, 400)
    assert paired_lower_bound(3, 1, 400, alpha=0.025 / 4) < paired_lower_bound(3, 1, 400)
    assert paired_lower_bound(3, 1, 400, alpha=0.2) > paired_lower_bound(3, 1, 400)
    for bad in (0.0, 0.5, -0.1):
        with pytest.raises(ValueError, match="alpha must be in"):
            paired_lower_bound(3, 1, 400, alpha=bad)
