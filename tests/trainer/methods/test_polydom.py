"""PolyDom's lattice pruning, candidate filter and polydominance index; the Greedy family; the
device-side budget index (``protocol.budget_index``), checked against exhaustive answers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from adaptedge.protocol.budget_index import BudgetIndex, cost_at, naive_lookup
from adaptedge.protocol.errors import BundleError
from adaptedge.trainer.methods.polydom.greedy import greedy_sequences
from adaptedge.trainer.methods.polydom.index import build_index, crossings
from adaptedge.trainer.methods.polydom.lattice import (
    candidates,
    expand_lattice,
    naive_expand_all,
    set_polys,
)


def combiner(n: int, seed: int, k: int = 2):  # type: ignore[no-untyped-def]
    """The paper's synthetic accuracies: a set is as good as its top-k features combined."""
    rng = np.random.default_rng(seed)
    single = np.where(rng.random(n) < 0.5, rng.uniform(0.6, 0.9, n), rng.uniform(0.5, 0.55, n))

    def accuracy(mask: int) -> float:
        got = sorted((single[s] for s in range(n) if mask >> s & 1), reverse=True)[:k]
        return 0.5 if not got else float(1 - np.prod([1 - (a - 0.5) for a in got]) * 0.5)

    return accuracy


def random_polys(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.uniform(0, 10, n), rng.uniform(0, 0.05, n), rng.uniform(0, 5e-5, n)], 1)


def best_within(masks: list[int], acc: dict[int, float], polys: np.ndarray, size: float,
                budget: float) -> float:
    costs = set_polys(masks, polys) @ size ** np.arange(polys.shape[1])
    fits = [acc[m] for m, c in zip(masks, costs, strict=True) if c <= budget]
    return max(fits, default=-1.0)


@pytest.mark.parametrize("epsilon", [0.0, 0.02])
def test_pruned_lattice_keeps_every_skyline_within_epsilon(epsilon: float) -> None:
    n, accuracy, polys = 8, combiner(8, 1), random_polys(8, 2)
    full = naive_expand_all(n, accuracy)
    pruned = expand_lattice(n, accuracy, epsilon=epsilon)
    assert pruned.expanded + pruned.pruned == 2 ** n and pruned.expanded < full.expanded
    cands = candidates(pruned, polys)
    everything = sorted(full.accuracy)
    for size, budget in itertools.product((1.0, 200.0, 900.0), (0.0, 10.0, 30.0, 80.0, 1e9)):
        best = best_within(everything, full.accuracy, polys, size, budget)
        got = best_within(cands, pruned.accuracy, polys, size, budget)
        assert got >= best - epsilon - 1e-12


def test_epsilon_prunes_more() -> None:
    accuracy = combiner(10, 3, k=1)  # the paper: a set is as good as its best feature
    counts = [expand_lattice(10, accuracy, epsilon=e).expanded for e in (0.0, 0.01, 0.05)]
    assert counts[0] >= counts[1] >= counts[2] and counts[2] <= 1024 // 10


def test_candidates_drop_polydominated_sets() -> None:
    from adaptedge.trainer.methods.polydom.lattice import Lattice

    polys = np.array([[1.0, 0.0], [2.0, 0.0], [0.5, 1.0]])
    lattice = Lattice(3, {0b001: 0.8, 0b010: 0.7, 0b100: 0.9, 0b011: 0.8, 0b000: 0.5})
    kept = candidates(lattice, polys)
    assert 0b010 not in kept  # sensor 0 is cheaper at every size and more accurate
    assert 0b011 not in kept  # a superset no more accurate (Property 3.6)
    assert {0b000, 0b001, 0b100} <= set(kept)  # 0b100 is cheaper below size 0.5


def test_index_answers_like_naive_lookup_and_is_smaller_than_index_all() -> None:
    rng = np.random.default_rng(5)
    polys = random_polys(40, 6)
    acc = rng.uniform(0.5, 0.95, 40)
    names = [f"p{i}" for i in range(40)]
    index = build_index(names, polys, acc)
    every = build_index(names, polys, acc, index_all=True)
    assert len(index.breaks) < len(every.breaks) == len(crossings(polys))
    for size, budget in zip(rng.uniform(0, 1200, 400), rng.uniform(0, 60, 400), strict=True):
        want = naive_lookup(index.models, size, budget)
        for idx in (index, every):
            got = idx.lookup(size, budget)
            assert (got is None) == (want is None)
            if want is not None:
                assert got is not None and acc[got] == acc[want]
                assert cost_at(index.models[got].cost, size) <= budget
    assert index.lookup(10.0, -1.0) is None


def test_index_round_trips_and_refuses_bad_json() -> None:
    polys = random_polys(6, 1)
    index = build_index([f"p{i}" for i in range(6)], polys, np.linspace(0.6, 0.9, 6))
    raw = index.to_dict()
    again = BudgetIndex.from_dict(raw, [f"p{i}" for i in range(6)])
    assert again.to_dict() == raw
    with pytest.raises(BundleError, match="models"):
        BudgetIndex.from_dict(raw, ["p0"])
    bad = dict(raw, breaks=[*reversed(raw["breaks"]), 1.0])
    with pytest.raises(BundleError, match="breaks"):
        BudgetIndex.from_dict(bad, [f"p{i}" for i in range(6)])


def test_greedy_family_sequences() -> None:
    accuracy, costs = combiner(6, 4), np.array([5.0, 1.0, 3.0, 2.0, 4.0, 0.5])
    cheap = greedy_sequences(6, accuracy, costs, (math.inf,))
    order = [int(np.log2(b ^ a)) for a, b in itertools.pairwise(cheap.sequences[0])]
    assert order == [5, 1, 3, 2, 4, 0]  # GreedyCost: cheapest next
    accurate = greedy_sequences(6, accuracy, costs, (0.0,))
    seq = accurate.sequences[0]
    assert len(seq) == 7 and seq[0] == 0 and seq[-1] == 63
    assert all(a & b == a for a, b in itertools.pairwise(seq))  # nested
    first = int(np.log2(seq[1]))
    assert accuracy(seq[1]) == max(accuracy(1 << s) for s in range(6)) and first >= 0
    assert accurate.expanded <= 1 + 6 * 7 // 2
