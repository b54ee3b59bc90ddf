"""PolyDom's progressive modality (``methods.polydom.progressive``): the smallest ε whose
expansion fits a budget of sensor sets scored, no set scored twice, the exact lattice when the
budget allows it."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.trainer.methods.polydom.lattice import expand_lattice
from adaptedge.trainer.methods.polydom.progressive import EPSILONS, progressive_lattice


def _world(n: int, seed: int) -> dict[int, float]:
    """A non-monotone accuracy per sensor set (trained models are not monotone)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.5, 0.9, size=n)
    return {m: float(min(1.0, max((base[s] for s in range(n) if m >> s & 1), default=0.5)
                         + 0.03 * rng.standard_normal())) for m in range(2 ** n)}


def test_a_large_budget_gives_the_smallest_epsilons_exact_lattice() -> None:
    world = _world(9, 0)
    calls: list[int] = []

    def accuracy(mask: int) -> float:
        calls.append(mask)
        return world[mask]

    got = progressive_lattice(9, accuracy, budget=10 ** 6)
    exact = expand_lattice(9, world.__getitem__, epsilon=min(EPSILONS))
    assert got.epsilon == min(EPSILONS)
    assert got.lattice.accuracy == exact.accuracy and got.lattice.expanded == exact.expanded
    assert len(calls) == len(set(calls)) == got.scored  # no set scored twice


def test_a_small_budget_stops_at_a_larger_epsilon_and_keeps_within_it() -> None:
    world = _world(12, 1)
    full = expand_lattice(12, world.__getitem__, epsilon=min(EPSILONS)).expanded
    counted: list[int] = []

    def accuracy(mask: int) -> float:
        counted.append(mask)
        return world[mask]

    budget = full // 2
    got = progressive_lattice(12, accuracy, budget=budget)
    assert got.epsilon > min(EPSILONS)
    assert got.scored <= budget and len(counted) <= budget
    alone = expand_lattice(12, world.__getitem__, epsilon=got.epsilon)
    assert got.lattice.accuracy == alone.accuracy  # the kept lattice is that ε's own


def test_a_budget_below_the_largest_epsilon_still_returns_its_lattice() -> None:
    world = _world(8, 2)
    got = progressive_lattice(8, world.__getitem__, budget=1)
    assert got.epsilon == max(EPSILONS)
    assert got.lattice.accuracy == expand_lattice(8, world.__getitem__,
                                                  epsilon=max(EPSILONS)).accuracy


def test_bad_budgets_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1 sensor set"):
        progressive_lattice(3, lambda m: 0.5, budget=0)
    with pytest.raises(ValueError, match="at least one epsilon"):
        progressive_lattice(3, lambda m: 0.5, budget=5, epsilons=())


def test_polydom_parameters_are_checked_before_fitting() -> None:
    from adaptedge.trainer.methods.params import ParamError, check_params

    assert check_params("polydom", {"max_sets": "500", "epsilon": "0.05", "covering": "1"}) == {
        "max_sets": 500, "epsilon": 0.05, "covering": True}
    with pytest.raises(ParamError, match="max_sets must be >= 1"):
        check_params("polydom", {"max_sets": "0"})
    with pytest.raises(ParamError, match="max_set"):  # a typo names the valid keys
        check_params("polydom", {"max_set": "5"})
    assert check_params("greedy-cost", {"classifier": "hgb"}) == {"classifier": "hgb"}


@pytest.mark.parametrize("budget", [10 ** 6, 300, 1])
def test_prefetch_sees_each_set_before_it_is_scored_and_stays_within_the_budget(
        budget: int) -> None:
    world = _world(11, 3)
    fetched: list[int] = []
    scored: list[int] = []

    def accuracy(mask: int) -> float:
        assert mask in fetched  # the hook had it first
        scored.append(mask)
        return world[mask]

    got = progressive_lattice(11, accuracy, budget=budget, prefetch=fetched.extend)
    plain = progressive_lattice(11, world.__getitem__, budget=budget)
    assert got == plain  # the hook changes when sets are fitted, never what is kept
    assert len(fetched) == len(set(fetched))  # no set handed over twice
    assert set(scored) <= set(fetched)
    if budget > 1:  # the capped expansions never hand over sets beyond the budget
        assert len(fetched) <= budget
