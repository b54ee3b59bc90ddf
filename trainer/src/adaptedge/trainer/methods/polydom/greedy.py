"""Greedy, GreedyAcc and GreedyCost (the paper's Algorithm 4 for any classifier).

At one item size (the median training size) each trade-off ``alpha`` grows one sequence of
nested feature sets: from the empty set, add the sensor maximising
``gain = (accuracy increase) - alpha * (cost increase) / (cost of every sensor)``, until every
sensor is in. GreedyAcc is ``alpha = 0`` (most accurate next), GreedyCost the cheapest next
sensor (``alpha`` infinite). Every set evaluated on the way counts as expanded. At run time the
walk follows the chosen sequence while the next set's cost at the item's size fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from adaptedge.trainer.methods.polydom.lattice import Accuracy

ALPHAS = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0, math.inf)
"""Greedy's trade-offs; GreedyAcc uses only 0 and GreedyCost only infinity."""
VARIANT_ALPHAS = {"greedy": ALPHAS, "greedy-acc": (0.0,), "greedy-cost": (math.inf,)}


@dataclass
class GreedyResult:
    sequences: list[list[int]]
    """Per alpha, the nested sets as masks, smallest first (the empty set included)."""
    accuracy: dict[int, float] = field(default_factory=dict)
    """Every set evaluated (expanded) on the way."""

    @property
    def expanded(self) -> int:
        return len(self.accuracy)


def greedy_sequences(n: int, accuracy: Accuracy, costs: npt.ArrayLike,
                     alphas: Sequence[float] = ALPHAS) -> GreedyResult:
    """One sequence per alpha over ``n`` sensors with per-sensor ``costs`` at the median size."""
    cost = np.asarray(costs, dtype=np.float64)
    scale = float(cost.sum()) or 1.0
    result = GreedyResult([])

    def acc(mask: int) -> float:
        if mask not in result.accuracy:
            result.accuracy[mask] = accuracy(mask)
        return result.accuracy[mask]

    for alpha in alphas:
        mask, seq = 0, [0]
        acc(0)
        while len(seq) <= n:
            rest = [s for s in range(n) if not mask >> s & 1]
            if math.isinf(alpha):
                pick = min(rest, key=lambda s: (cost[s], s))
            else:
                base = acc(mask)
                pick = max(rest, key=lambda s: (acc(mask | 1 << s) - base
                                                - alpha * cost[s] / scale, -s))
            mask |= 1 << pick
            acc(mask)
            seq.append(mask)
        result.sequences.append(seq)
    return result
