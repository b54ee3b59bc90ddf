"""The feature-set lattice, expanded breadth-first from both ends with sandwich and covering
pruning (Algorithm 2), and the candidate filter (Properties 3.6 and 3.7).

Sets are bit masks over ``n`` sensors. *Expanding* a set trains its model and measures its
validation accuracy (the ``accuracy`` callable; the expensive step every count here measures).
Layers are visited from both ends in turn (sizes 0, n, 1, n-1, ...). A set is not expanded when
an expanded subset ``L`` and an expanded superset ``U`` sandwich it with
``acc(L) >= acc(U) + delta - epsilon`` (Properties 3.3/3.11: under delta-relaxed monotonicity
every set between them is at most ``epsilon`` better than ``L`` and costs at least as much at
every size). Each candidate is checked against every expanded pair, not just the frontiers.

With ``covering`` (the covering property, 3.4), a set ``C`` is also not expanded when some
expanded ``F`` inside it dominates (with the same ``delta - epsilon`` margin) expanded strict
supersets ``F_1..F_m`` whose union contains ``C``: ``F`` is then at most ``epsilon`` worse than
every set between ``F`` and that union, which need not itself be expanded. That holds when a set
is as good as its best feature (the paper's §6 combiner at k = 1), and at ``epsilon = 0`` for its
top-k combiner; when features combine it may not: at k = 2 two features that each add 0.04 to
``F`` can add 0.075 together, more than ``epsilon = 0.05``. The text applies it to the frontiers
(prune the parents of a bottom-frontier set whose top-frontier supersets it dominates); the
union over every expanded dominated superset prunes at least as much. Its inverse (pruning the
descendants of a top-frontier set down to the intersection of dominating subsets) is not
applied: the set that would dominate them, the intersection, is not expanded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

Accuracy = Callable[[int], float]
"""Bit mask of sensors -> validation accuracy of the model trained on them."""
Prefetch = Callable[[list[int]], None]
"""Called with the sets about to be scored, in scoring order, before ``Accuracy`` is: a hook to
fit their models at once (in parallel) instead of one by one."""


@dataclass
class Lattice:
    n: int
    accuracy: dict[int, float] = field(default_factory=dict)
    """Every expanded set's accuracy."""
    pruned: int = 0

    @property
    def expanded(self) -> int:
        return len(self.accuracy)


MAX_SENSORS = 24
"""The most sensors a lattice is expanded over: 2**24 sets enumerated layer by layer (a layer's
pruning needs it whole; wall-robot's 24 sensors: about 30 s for ``--quick``); ``train --method
polydom`` refuses more (miniboone-tiny's 50 sensors: 2**50)."""


def masks_of_size(n: int, k: int) -> npt.NDArray[np.int64]:
    """Every set of ``k`` of ``n`` sensors as a bit mask, in ``itertools.combinations`` order
    (lexicographic in the sensor indices: descending in the bit-reversed mask)."""
    sizes, reversed_bits = _mask_index(n)
    masks = np.flatnonzero(sizes == k)
    out: npt.NDArray[np.int64] = masks[np.argsort(-reversed_bits[masks], kind="stable")]
    return out


@lru_cache(maxsize=1)
def _mask_index(n: int) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int32]]:
    """Each of the 2**n masks' size and bit-reversed value (index = mask, n < 32); 84 MB at
    24, kept for the next expansion of the same lattice (``progressive`` runs up to five)."""
    if n >= 32:
        raise ValueError(f"a lattice of {n} sensors has 2**{n} sets: too many to list")
    masks = np.arange(1 << n, dtype=np.int32)
    sizes = np.zeros(masks.size, dtype=np.uint8)
    reversed_bits = np.zeros(masks.size, dtype=np.int32)
    for bit in range(n):
        set_ = (masks >> bit) & 1
        sizes += set_.astype(np.uint8)
        reversed_bits |= set_ << (n - 1 - bit)
    return sizes, reversed_bits


def layer_order(n: int) -> list[int]:
    """Layer sizes from both ends in turn: 0, n, 1, n-1, ..."""
    lo, hi, out = 0, n, []
    while lo <= hi:
        out.append(lo)
        if hi != lo:
            out.append(hi)
        lo, hi = lo + 1, hi - 1
    return out


class _Side:
    """The expanded sets of one end of the lattice (the small layers or the large ones) and,
    for every set of the lattice, the best (small end: of its subsets) or worst (large end: of
    its supersets) of their accuracies: a subset-max or superset-min transform over all 2**n
    sets, as ranks into the sorted accuracies (exactly the float max/min; int16 when they fit,
    a quarter of float64's memory traffic: 0.25 s a transform at 24 sensors)."""

    def __init__(self, n: int, below: bool) -> None:
        self.n, self.below = n, below
        self.accuracy: dict[int, float] = {}
        self.levels: npt.NDArray[np.float64] = np.empty(0)
        self.ranks: npt.NDArray[np.signedinteger[Any]] | None = None
        self.stale = False

    def add(self, mask: int, accuracy: float) -> None:
        self.accuracy[mask] = accuracy
        self.stale = True

    def bound(self, candidates: npt.NDArray[np.int64]
              ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
        """Which candidates have an expanded set on this side, and its best/worst accuracy."""
        if self.stale:
            self._transform()
        if self.ranks is None:
            return np.zeros(candidates.size, dtype=bool), np.zeros(candidates.size)
        got = self.ranks[candidates]
        found = got >= 0 if self.below else got < self.levels.size
        return found, self.levels[np.where(found, got, 0)]

    def _transform(self) -> None:
        masks = np.fromiter(self.accuracy, dtype=np.int64, count=len(self.accuracy))
        self.levels, rank = np.unique(np.fromiter(self.accuracy.values(), dtype=np.float64,
                                                  count=masks.size), return_inverse=True)
        dtype = np.int16 if self.levels.size < np.iinfo(np.int16).max else np.int32
        none = -1 if self.below else self.levels.size  # a set with no expanded subset/superset
        ranks: npt.NDArray[np.signedinteger[Any]] = np.full(1 << self.n, none, dtype=dtype)
        ranks[masks] = rank
        for bit in range(self.n):  # each set takes the best of its sets one sensor smaller
            pairs = ranks.reshape(-1, 2, 1 << bit)  # [:, 1]: the sets with `bit`, [:, 0]: without
            if self.below:
                np.maximum(pairs[:, 1], pairs[:, 0], out=pairs[:, 1])
            else:
                np.minimum(pairs[:, 0], pairs[:, 1], out=pairs[:, 0])
        self.ranks, self.stale = ranks, False


class _Sandwich:
    """Property 3.3's pruning check for ``expand_lattice``. Every set expanded at a small layer
    is smaller than every set of the layers still to come, and every set of a large layer
    larger (``layer_order``), so a candidate's expanded strict subsets are the small end's
    sets inside it and its strict supersets the large end's containing it: a transform per end
    (``_Side``), redone only after that end grew, answers a whole layer at once."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.small, self.large = _Side(n, below=True), _Side(n, below=False)

    def add(self, mask: int, size: int, accuracy: float) -> None:
        (self.small if 2 * size < self.n else self.large).add(mask, accuracy)

    def check(self, layer: npt.NDArray[np.int64], epsilon: float, delta: float
              ) -> npt.NDArray[np.bool_]:
        """Which of ``layer``'s sets an expanded (subset, superset) pair sandwiches:
        ``acc(subset) >= acc(superset) + delta - epsilon``."""
        if not self.small.accuracy or not self.large.accuracy or not layer.size:
            return np.zeros(layer.size, dtype=bool)
        has_below, best_below = self.small.bound(layer)
        has_above, worst_above = self.large.bound(layer)
        out: npt.NDArray[np.bool_] = (has_below & has_above
                                      & (best_below >= worst_above + delta - epsilon))
        return out


def covered(candidates: npt.NDArray[np.int64], lattice: Lattice, epsilon: float, delta: float
            ) -> npt.NDArray[np.bool_]:
    """Which candidates the covering property (3.4) prunes: ``F <= C <= union(F_i)``, ``C != F``,
    for an expanded ``F`` and its expanded strict supersets ``F_i`` with
    ``acc(F) >= acc(F_i) + delta - epsilon``."""
    if not lattice.accuracy or not candidates.size:
        return np.zeros(candidates.size, dtype=bool)
    masks = np.fromiter(lattice.accuracy, dtype=np.int64)
    acc = np.fromiter(lattice.accuracy.values(), dtype=np.float64)
    unions = np.zeros(len(masks), dtype=np.int64)
    for i, (mask, a) in enumerate(zip(masks.tolist(), acc.tolist(), strict=True)):
        above = ((masks & mask) == mask) & (masks != mask) & (a >= acc + delta - epsilon)
        if above.any():
            unions[i] = np.bitwise_or.reduce(masks[above])
    base, unions = masks[unions != 0], unions[unions != 0]
    cand = np.asarray(candidates, dtype=np.int64)[:, None]
    inside = ((cand & base[None, :]) == base[None, :]) & ((cand & unions[None, :]) == cand)
    out: npt.NDArray[np.bool_] = (inside & (cand != base[None, :])).any(axis=1)
    return out


def expand_lattice(n: int, accuracy: Accuracy, *, epsilon: float, delta: float = 0.0,
                   covering: bool = False, prefetch: Prefetch | None = None) -> Lattice:
    """PolyDom's lattice expansion, Algorithm 2 when ``covering`` (see the module docstring).
    A layer's pruning depends on the layers before it only, so its unpruned sets go to
    ``prefetch`` together before each is scored."""
    lattice, sandwich = Lattice(n), _Sandwich(n)
    for k in layer_order(n):
        layer = masks_of_size(n, k)
        skip = sandwich.check(layer, epsilon, delta)
        if covering:
            skip |= covered(layer, lattice, epsilon, delta)
        lattice.pruned += int(skip.sum())
        todo: list[int] = layer[~skip].tolist()
        if prefetch is not None:
            prefetch(todo)
        for mask in todo:
            lattice.accuracy[mask] = got = accuracy(mask)
            sandwich.add(mask, k, got)
    return lattice


def naive_expand_all(n: int, accuracy: Accuracy) -> Lattice:
    """NaiveExpandAll: every set of the lattice."""
    lattice = Lattice(n)
    for k in range(n + 1):
        for mask in masks_of_size(n, k).tolist():
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
