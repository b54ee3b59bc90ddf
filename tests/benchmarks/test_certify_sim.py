"""``benchmarks.certify_sim``: the false-certification simulation of the certifying rules."""

from __future__ import annotations

import numpy as np

from benchmarks.certify_sim import trial


def test_a_worse_point_in_sequence_means_a_worse_point_one_by_one() -> None:
    """The sequence's pick is the cheapest of a prefix of the points that pass one by one,
    and the truly worse points are the cheaper ones: whenever the sequence certifies one, the
    per-point rule does too. With every point truly worse the sequence rarely certifies."""
    rng = np.random.default_rng(1)
    draws = [trial(rng, 400, 10, 0.002, 0) for _ in range(40)]
    assert all(d["per_point"] for d in draws if d["sequence_list"])
    assert sum(d["sequence_list"] for d in draws) <= 3
    assert sum(d["per_point"] for d in draws) >= sum(d["sequence_list"] for d in draws)
    good = [trial(rng, 4000, 10, 0.002, 10) for _ in range(10)]
    assert not any(any(d.values()) for d in good)  # no worse point: nothing to certify wrongly
