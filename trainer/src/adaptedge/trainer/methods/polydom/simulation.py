"""The paper's §6 simulation (Indexing Cost Sensitive Prediction): feature sets whose accuracies
and cost functions are drawn, not learnt, so that the lattice, the index and the retrieval are
measured alone.

Each of ``n`` features is helpful with probability ``helpful``; its accuracy is uniform in
``HELPFUL_ACCURACY`` if so, else in ``UNHELPFUL_ACCURACY`` (two classes: 0.5 is chance). A set's
accuracy combines its ``k`` most accurate features (the paper's combiner: ``k = 1`` is "as good
as its best feature", a large ``k`` makes every added feature help): its error over chance is
the product of theirs, ``acc(F) = 1 - 0.5 * prod_j 2 (1 - a_j)``, so ``acc`` of one feature is
its own and the accuracies are monotone. A feature's extraction cost at item size ``s`` is
``c0 + c1 s + c2 s^2`` with ``c0, c1, c2`` uniform in ``COST_RANGES`` (``c2`` small because it
multiplies ``s^2``; curves cross often over ``SIZES``), a set's the sum of its features'.

Declared departure: the text of the paper we have lost its formulas, so the ranges above and
the combiner's form are ours, chosen to the paper's description (helpful vs not, top-k
combiner with ``k = 1`` and large ``k`` as the extremes, degree-2 costs with many crossings,
budgets around 1,000 meaningful).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adaptedge.trainer.methods.polydom.greedy import GreedyResult

HELPFUL_ACCURACY = (0.7, 0.95)
UNHELPFUL_ACCURACY = (0.5, 0.6)
COST_RANGES = ((0.0, 100.0), (0.0, 10.0), (0.0, 0.1))
SIZES = (1.0, 100.0)
"""Item sizes of the simulated items (the training size, Greedy's, is their middle)."""
TRAIN_SIZE = 50.0

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class World:
    """One simulated configuration: per-feature accuracies and cost polynomials."""

    single: FloatArray
    polys: FloatArray
    """[n, 3] cost coefficients (c0, c1, c2) per feature."""
    k: int

    @property
    def n(self) -> int:
        return len(self.single)

    def accuracy(self, mask: int) -> float:
        """The combiner on the set's ``k`` most accurate features (0.5 for the empty set)."""
        got = sorted((float(self.single[s]) for s in range(self.n) if mask >> s & 1),
                     reverse=True)[: self.k]
        return 1.0 - 0.5 * math.prod(2.0 * (1.0 - a) for a in got)

    def cost(self, mask: int, size: float) -> float:
        bits = [s for s in range(self.n) if mask >> s & 1]
        return float(sum(self.polys[s] @ np.array([1.0, size, size * size]) for s in bits))

    def feature_costs(self, size: float) -> FloatArray:
        out: FloatArray = self.polys @ np.array([1.0, size, size * size])
        return out


def simulate(n: int, *, k: int = 1, helpful: float = 0.5, seed: int = 0) -> World:
    """Draw ``n`` features (``k``: the combiner's; ``helpful``: the share of helpful ones)."""
    rng = np.random.default_rng(seed)
    useful = rng.random(n) < helpful
    single = np.where(useful, rng.uniform(*HELPFUL_ACCURACY, n),
                      rng.uniform(*UNHELPFUL_ACCURACY, n))
    polys = np.stack([rng.uniform(lo, hi, n) for lo, hi in COST_RANGES], axis=1)
    return World(single, polys, k)


def greedy_pick(world: World, result: GreedyResult, size: float, budget: float) -> float:
    """The paper's Greedy retrieval: the best set of the sequences' skyline whose cost at the
    training size fits ``budget``, then its sequence walked at the item's ``size`` while the next
    set fits; the accuracy of the set reached (chance, 0.5, when nothing fits)."""
    best: tuple[float, int] | None = None  # (accuracy, sequence)
    for q, seq in enumerate(result.sequences):
        for mask in seq:
            if world.cost(mask, TRAIN_SIZE) <= budget:
                acc = result.accuracy[mask]
                if best is None or acc > best[0]:
                    best = (acc, q)
    if best is None:
        return 0.5
    reached = 0
    for mask in result.sequences[best[1]]:
        if world.cost(mask, size) > budget:
            break
        reached = mask
    return world.accuracy(reached) if world.cost(reached, size) <= budget else 0.5


def polydom_pick(world: World, masks: list[int], size: float, budget: float) -> float:
    """The most accurate candidate set whose cost at ``size`` fits (chance when none does)."""
    fits = [world.accuracy(m) for m in masks if world.cost(m, size) <= budget]
    return max(fits, default=0.5)
