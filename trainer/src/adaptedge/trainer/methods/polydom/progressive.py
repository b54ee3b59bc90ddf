"""PolyDom's progressive modality (the paper's §3 Discussion): a precomputation budget, and the
smallest ε whose lattice expansion fits it.

"A user provides a precomputation pruning cost budget, and the pruning algorithm picks the best
ε to meet [it]: we start with a large ε, run the lattice pruning algorithm, reduce ε by a small
amount and rerun, until we run out of the budget." The budget here counts sensor sets scored
(each one a model trained and measured on validation); a set scored at a larger ε is not scored
again at a smaller one, so no work is wasted (the paper's Property 3.9: the sets expanded at a
larger ε are, mostly, a subset of a smaller ε's). The expansion whose ε would overspend is
abandoned and the last one completed is kept; when even the largest ε overspends, it runs to the
end regardless, so training always returns a lattice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adaptedge.trainer.errors import SearchBudgetSpent
from adaptedge.trainer.methods.polydom.lattice import (
    Accuracy,
    Lattice,
    Prefetch,
    expand_lattice,
)

EPSILONS = (0.2, 0.1, 0.05, 0.02, 0.01)
"""The ε tried, largest first; the last is ``train --method polydom``'s exact default."""
QUICK_BUDGET = 1_000
"""Sensor sets ``--quick`` may score (up to 9 sensors every set fits: 2**9 - 1)."""
DEFAULT_BUDGET = 4_000
"""Sensor sets the default sweep may score (up to 11 sensors every set fits: 2**11 - 1)."""


@dataclass(frozen=True)
class Progressive:
    """The lattice kept, its ε, and how many distinct sets were scored over every ε tried."""

    lattice: Lattice
    epsilon: float
    scored: int


def progressive_lattice(n: int, accuracy: Accuracy, budget: int, *,
                        epsilons: Sequence[float] = EPSILONS, delta: float = 0.0,
                        covering: bool = False, prefetch: Prefetch | None = None
                        ) -> Progressive:
    """The lattice at the smallest of ``epsilons`` whose expansion keeps the distinct sets
    scored (over every ε tried so far) within ``budget``; ``accuracy`` is called once per set.
    ``prefetch`` (``lattice.Prefetch``) gets each layer's sets not scored yet, as far as the
    budget reaches."""
    if budget < 1:
        raise ValueError(f"the budget must be at least 1 sensor set, got {budget}")
    if not epsilons:
        raise ValueError("give at least one epsilon")
    memo: dict[int, float] = {}

    def scored(mask: int, capped: bool = True) -> float:
        if mask not in memo:
            if capped and len(memo) >= budget:
                raise SearchBudgetSpent
            memo[mask] = accuracy(mask)
        return memo[mask]

    def ahead(masks: list[int], capped: bool = True) -> None:
        if prefetch is not None:
            new = [m for m in masks if m not in memo]
            prefetch(new[:max(0, budget - len(memo))] if capped else new)

    kept: Progressive | None = None
    for eps in sorted(epsilons, reverse=True):
        try:
            lattice = expand_lattice(n, scored, epsilon=eps, delta=delta, covering=covering,
                                     prefetch=ahead)
        except SearchBudgetSpent:
            break
        kept = Progressive(lattice, eps, len(memo))
    if kept is None:  # even the largest epsilon overspends: finish it anyway
        eps = max(epsilons)
        lattice = expand_lattice(n, lambda m: scored(m, capped=False), epsilon=eps,
                                 delta=delta, covering=covering,
                                 prefetch=lambda masks: ahead(masks, capped=False))
        kept = Progressive(lattice, eps, len(memo))
    return kept
