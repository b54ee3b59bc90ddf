"""Algorithm 2 (issue 32): the paper's worked example on four features (Figure 2), the covering
property (3.4) beside the sandwich property (3.3), and that no expanded set was prunable by the
sets expanded before it."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from adaptedge.trainer.methods.polydom.lattice import (
    Lattice,
    candidates,
    expand_lattice,
    layer_order,
    masks_of_size,
    naive_expand_all,
)
from adaptedge.trainer.methods.polydom.simulation import simulate

A, B, C, D = 1, 2, 4, 8
FIGURE_2 = {0: 0.5, A: 0.80, B: 0.60, C: 0.62, D: 0.75,
            A | B: 0.81, A | C: 0.82, A | D: 0.81, B | C: 0.70, B | D: 0.75, C | D: 0.75,
            A | B | C: 0.84, A | B | D: 0.83, A | C | D: 0.88, B | C | D: 0.75,
            A | B | C | D: 0.90}
"""Accuracies of our own (the text lost the figure's): monotone, with the structure the text
describes. Exactly, {D} and {B,C,D} are equally accurate; slightly approximately, {A} is within
0.05 of {A,B,C} and of {A,B,D}."""


def test_figure_2_worked_example() -> None:
    assert all(FIGURE_2[s] <= FIGURE_2[t] for s, t in itertools.product(FIGURE_2, repeat=2)
               if s & t == s)
    for covering in (False, True):
        exact = expand_lattice(4, FIGURE_2.__getitem__, epsilon=0.0, covering=covering)
        # "nodes in the top two and bottom two layers are expanded ... we save two expansions":
        # {B,D} and {C,D} sit between {D} and {B,C,D} at the same accuracy.
        assert set(FIGURE_2) - set(exact.accuracy) == {B | D, C | D}
        slight = expand_lattice(4, FIGURE_2.__getitem__, epsilon=0.05, covering=covering)
        # "only one node in the middle layer needs to be expanded": three sandwiches prune five.
        middle = [m for m in slight.accuracy if bin(m).count("1") == 2]
        assert middle == [B | C] and slight.expanded == 11


def prunable(mask: int, earlier: dict[int, float], epsilon: float, covering: bool) -> bool:
    """An independent check, from the properties' statements, over the sets expanded before."""
    for low, high in itertools.product(earlier, repeat=2):
        if (low & mask == low and mask & high == mask and low != mask != high
                and earlier[low] >= earlier[high] - epsilon):
            return True
    if not covering:
        return False
    for low, a in earlier.items():
        union = 0
        for high, b in earlier.items():
            if high & low == low and high != low and a >= b - epsilon:
                union |= high
        if low & mask == low and mask & union == mask and mask != low:
            return True
    return False


@pytest.mark.parametrize(("k", "epsilon", "covering"),
                         [(1, 0.0, True), (1, 0.05, True), (2, 0.02, False), (6, 0.03, True)])
def test_no_expanded_set_was_prunable_when_it_was_expanded(k: int, epsilon: float,
                                                            covering: bool) -> None:
    w = simulate(6, k=k, seed=4)
    lattice = expand_lattice(6, w.accuracy, epsilon=epsilon, covering=covering)
    order = list(lattice.accuracy)  # expansion order (layers 0, n, 1, n-1, ...)
    layer_of = [bin(m).count("1") for m in order]
    for i, mask in enumerate(order):
        first = layer_of.index(layer_of[i])  # sets of one layer do not prune each other
        earlier = {m: lattice.accuracy[m] for m in order[:first]}
        assert not prunable(mask, earlier, epsilon, covering), bin(mask)
    assert lattice.expanded + lattice.pruned == 2 ** 6


def test_covering_prunes_what_the_sandwich_expands_at_k1() -> None:
    """k = 1, epsilon = 0: the sandwich alone expands 2 + n + sum over layers j >= 2 of
    C(n - j, j) plus one set per top layer (95 at n = 10, for any distinct accuracies);
    covering stops above the pairs, 2 + n + 1 + C(n - 2, 2) (41 at n = 10)."""
    for seed in range(3):
        acc = simulate(10, k=1, seed=seed).accuracy
        assert expand_lattice(10, acc, epsilon=0.0).expanded == 95
        assert expand_lattice(10, acc, epsilon=0.0, covering=True).expanded == 2 + 10 + 1 + \
            math.comb(8, 2)


@pytest.mark.parametrize("k", [1, 2, 7])
def test_covering_keeps_the_exact_skyline_of_top_k_accuracies(k: int) -> None:
    """Exact (epsilon = 0) with the paper's combiner: every (size, budget) answer of the full
    lattice is found among the covered lattice's candidates."""
    w = simulate(7, k=k, seed=k)
    full, pruned = naive_expand_all(7, w.accuracy), expand_lattice(7, w.accuracy, epsilon=0.0,
                                                                    covering=True)
    kept = candidates(pruned, w.polys)
    for size, budget in itertools.product((1.0, 30.0, 100.0), (0.0, 50.0, 200.0, 800.0, 1e9)):
        best = max((a for m, a in full.accuracy.items() if w.cost(m, size) <= budget),
                   default=0.5)
        got = max((pruned.accuracy[m] for m in kept if w.cost(m, size) <= budget), default=0.5)
        assert got == pytest.approx(best)


def test_polydom_refuses_more_sensors_than_a_lattice_can_hold(tmp_path: Path) -> None:
    from adaptedge.trainer.api import TrainError, train_bundle

    # miniboone-tiny has 50 sensors: 2**50 sets; refused before the HPC is fitted
    with pytest.raises(TrainError, match=r"2\^50 sets .* at most 24: use --method greedy"):
        train_bundle("miniboone-tiny", "polydom", tmp_path / "b", quick=True, progress=False)
    assert not (tmp_path / "b").exists()


def _sandwiched_reference(candidates: list[int], lattice: Lattice, epsilon: float,
                          delta: float) -> list[bool]:
    """Property 3.3 read off directly: an expanded strict subset and strict superset of the
    candidate, the subset at least ``delta - epsilon`` more accurate."""
    out = []
    for c in candidates:
        below = [a for m, a in lattice.accuracy.items() if m & c == m and m != c]
        above = [a for m, a in lattice.accuracy.items() if m & c == c and m != c]
        out.append(bool(below and above and max(below) >= min(above) + delta - epsilon))
    return out


def _expand_reference(n: int, accuracy: dict[int, float], epsilon: float, delta: float
                      ) -> Lattice:
    """Algorithm 2 without covering, each candidate checked against every expanded pair."""
    lattice = Lattice(n)
    for k in layer_order(n):
        layer = [sum(1 << i for i in c) for c in itertools.combinations(range(n), k)]
        skip = _sandwiched_reference(layer, lattice, epsilon, delta)
        lattice.pruned += sum(skip)
        for mask in itertools.compress(layer, [not s for s in skip]):
            lattice.accuracy[mask] = accuracy[mask]
    return lattice


@pytest.mark.parametrize(("n", "seed"), [(8, 0), (9, 1), (10, 2), (7, 3)])
def test_the_sandwich_transforms_expand_as_property_3_3_read_directly(n: int, seed: int
                                                                       ) -> None:
    """Accuracies neither monotone nor distinct (ties included), odd and even sizes: the same
    sets expanded, in the same order, and the same count pruned."""
    import numpy as np

    rng = np.random.default_rng(seed)
    world = {m: float(rng.choice([0.5, 0.6, 0.7, 0.8, 0.9])) for m in range(2 ** n)}
    for epsilon, delta in ((0.0, 0.0), (0.1, 0.0), (0.05, 0.02)):
        got = expand_lattice(n, world.__getitem__, epsilon=epsilon, delta=delta)
        want = _expand_reference(n, world, epsilon, delta)
        assert list(got.accuracy.items()) == list(want.accuracy.items())
        assert got.pruned == want.pruned > 0


def test_more_accuracies_than_int16_ranks_switch_to_int32() -> None:
    import numpy as np

    from adaptedge.trainer.methods.polydom.lattice import _Side

    rng = np.random.default_rng(7)
    n = 16
    masks = rng.choice(2 ** n, size=40_000, replace=False)
    accuracy = rng.permutation(40_000) / 40_000  # every value distinct: 40,000 ranks
    below, above = _Side(n, below=True), _Side(n, below=False)
    for m, a in zip(masks.tolist(), accuracy.tolist(), strict=True):
        below.add(m, a)
        above.add(m, a)
    probe = rng.choice(2 ** n, size=300, replace=False).astype(np.int64)
    has_sub, best = below.bound(probe)
    has_sup, worst = above.bound(probe)
    assert below.ranks is not None and below.ranks.dtype == np.int32
    for i, c in enumerate(probe.tolist()):
        subs = accuracy[(masks & c) == masks]
        sups = accuracy[(masks & c) == c]
        assert has_sub[i] == bool(subs.size) and has_sup[i] == bool(sups.size)
        assert best[i] == (subs.max() if subs.size else best[i])
        assert worst[i] == (sups.min() if sups.size else worst[i])


@pytest.mark.parametrize("n", [1, 5, 10])
def test_masks_of_size_lists_each_layer_in_combinations_order(n: int) -> None:
    for k in range(n + 1):
        expected = [sum(1 << i for i in c) for c in itertools.combinations(range(n), k)]
        assert masks_of_size(n, k).tolist() == expected
