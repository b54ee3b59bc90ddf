"""The feature-set lattice, expanded breadth-first from both ends with sandwich pruning, and
the candidate filter (Properties 3.6 and 3.7).

Sets are bit masks over ``n`` sensors. *Expanding* a set trains its model and measures its
validation accuracy (the ``accuracy`` callable; the expensive step every count here measures).
Layers are visited from both ends in turn (sizes 0, n, 1, n-1, ...). A set is not expanded when
an expanded subset ``L`` and an expanded superset ``U`` sandwich it with
``acc(L) >= acc(U) + delta - epsilon`` (Properties 3.3/3.11: under delta-relaxed monotonicity
every set between them is at most ``epsilon`` better than ``L`` and costs at least as much at
every size). The bottom and top frontiers grow together, so a frontier pair covering a whole
region of the lattice (the covering property, 3.4) prunes every set inside it, each checked
against every expanded pair, not just the frontier.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import numpy.typing as npt

Accuracy = Callable[[int], float]
"""Bit mask of sensors -> validation accuracy of the model trained on them."""


@dataclass
class Lattice:
    n: int
    accuracy: dict[int, float] = field(default_factory=dict)
    """Every expanded set's accuracy."""
    pruned: int = 0

    @property
    def expanded(self) -> int:
        return len(self.accuracy)


def masks_of_size(n: int, k: int) -> list[int]:
    return [sum(1 << i for i in c) for c in combinations(range(n), k)]


def layer_order(n: int) -> list[int]:
    """Layer sizes from both ends in turn: 0, n, 1, n-1, ..."""
    lo, hi, out = 0, n, []
    while lo <= hi:
        out.append(lo)
        if hi != lo:
            out.append(hi)
        lo, hi = lo + 1, hi - 1
    return out


def sandwiched(candidates: list[int], lattice: Lattice, epsilon: float, delta: float
               ) -> npt.NDArray[np.bool_]:
    """Which candidates some expanded (subset, superset) pair sandwiches."""
    if not lattice.accuracy or not candidates:
        return np.zeros(len(candidates), dtype=bool)
    masks = np.fromiter(lattice.accuracy, dtype=np.int64)
    acc = np.fromiter(lattice.accuracy.values(), dtype=np.float64)
    cand = np.asarray(candidates, dtype=np.int64)[:, None]
    sub = (masks[None, :] & cand) == masks[None, :]
    sup = (masks[None, :] & cand) == cand
    sub &= masks[None, :] != cand
    sup &= masks[None, :] != cand
    best_below = np.where(sub, acc[None, :], -np.inf).max(axis=1)
    worst_above = np.where(sup, acc[None, :], np.inf).min(axis=1)
    out: npt.NDArray[np.bool_] = best_below >= worst_above + delta - epsilon
    return out


def expand_lattice(n: int, accuracy: Accuracy, *, epsilon: float, delta: float = 0.0
                   ) -> Lattice:
    """PolyDom's lattice expansion (see the module docstring)."""
    lattice = Lattice(n)
    for k in layer_order(n):
        layer = masks_of_size(n, k)
        skip = sandwiched(layer, lattice, epsilon, delta)
        lattice.pruned += int(skip.sum())
        for mask, pruned in zip(layer, skip.tolist(), strict=True):
            if not pruned:
                lattice.accuracy[mask] = accuracy(mask)
    return lattice


def naive_expand_all(n: int, accuracy: Accuracy) -> Lattice:
    """NaiveExpandAll: every set of the lattice."""
    lattice = Lattice(n)
    for k in range(n + 1):
        for mask in masks_of_size(n, k):
            lattice.accuracy[mask] = accuracy(mask)
    return lattice


def set_polys(masks: list[int], sensor_polys: npt.NDArray[np.float64]
              ) -> npt.NDArray[np.float64]:
    """[M, D]: each set's cost polynomial, the sum of its sensors' (Equation 1)."""
    bits = np.array([[m >> s & 1 for s in range(len(sensor_polys))] for m in masks],
                    dtype=np.float64).reshape(len(masks), len(sensor_polys))
    out: npt.NDArray[np.float64] = bits @ sensor_polys
    return out


def candidates(lattice: Lattice, sensor_polys: npt.NDArray[np.float64]) -> list[int]:
    """Expanded sets not polydominated (Properties 3.6, 3.7): drop ``F2`` when some ``F1``
    costs no more at every size (coefficient-wise, enough for sizes >= 0; subsets always do)
    and is at least as accurate (identical pairs keep the smaller mask)."""
    masks = sorted(lattice.accuracy)
    acc = np.array([lattice.accuracy[m] for m in masks])
    polys = set_polys(masks, sensor_polys)
    keep = []
    for j in range(len(masks)):
        cheaper = (polys <= polys[j]).all(axis=1) & (acc >= acc[j])
        cheaper[j] = False
        strictly = cheaper & ((polys < polys[j]).any(axis=1) | (acc > acc[j])
                              | (np.arange(len(masks)) < j))
        if not strictly.any():
            keep.append(masks[j])
    return keep
