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
pruning needs it whole; wall-robot's 24 sensors: 46 s for ``--quick``); ``train --method
polydom`` refuses more (miniboone-tiny's 50 sensors: 2**50)."""
CHUNK = 2048
"""Candidates compared against the expanded sets at a time (bounds the pruning's memory)."""


def masks_of_size(n: int, k: int) -> list[int]:
    """Every set of ``k`` of ``n`` sensors as a bit mask, in ``itertools.combinations`` order
    (lexicographic in the sensor indices: descending in the bit-reversed mask)."""
    sizes, reversed_bits = _mask_index(n)
    masks = np.flatnonzero(sizes == k)
    out: list[int] = masks[np.argsort(-reversed_bits[masks], kind="stable")].tolist()
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


def _sizes(masks: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """How many sensors each mask holds."""
    out = np.zeros(masks.size, dtype=np.int64)
    rest = masks.copy()
    while rest.any():
        out += rest & 1
        rest >>= 1
    return out


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
    """Which candidates some expanded (subset, superset) pair sandwiches (``CHUNK`` candidates
    at a time: a middle layer of 16 sensors against 4,000 expanded sets is 412 MB at once)."""
    out = np.zeros(len(candidates), dtype=bool)
    if not lattice.accuracy or not candidates:
        return out
    bits = np.int32 if lattice.n < 32 else np.int64  # half the memory traffic when it fits
    masks = np.fromiter(lattice.accuracy, dtype=np.int64)
    acc = np.fromiter(lattice.accuracy.values(), dtype=np.float64)
    cand_all = np.asarray(candidates, dtype=np.int64)
    mask_sizes, cand_sizes = _sizes(masks), _sizes(cand_all)
    masks, cand_all = masks.astype(bits), cand_all.astype(bits)
    for k in np.unique(cand_sizes).tolist():  # strict subsets are smaller, supersets larger
        rows = np.flatnonzero(cand_sizes == k)
        below, above = mask_sizes < k, mask_sizes > k
        out[rows] = _sandwiched_by(cand_all[rows], masks[below], acc[below], masks[above],
                                   acc[above], delta, epsilon)
    return out


def _sandwiched_by(cand_all: npt.NDArray[np.integer], subs: npt.NDArray[np.integer],
                   sub_acc: npt.NDArray[np.float64], sups: npt.NDArray[np.integer],
                   sup_acc: npt.NDArray[np.float64], delta: float, epsilon: float
                   ) -> npt.NDArray[np.bool_]:
    """For candidates of one size: an expanded subset at least ``delta - epsilon`` more
    accurate than an expanded superset (``subs`` all smaller, ``sups`` all larger)."""
    out = np.zeros(cand_all.size, dtype=bool)
    if not subs.size or not sups.size:
        return out
    for start in range(0, cand_all.size, CHUNK):
        cand = cand_all[start:start + CHUNK, None]
        best_below = np.where((subs & cand) == subs, sub_acc, -np.inf).max(axis=1)
        worst_above = np.where((sups & cand) == cand, sup_acc, np.inf).min(axis=1)
        out[start:start + CHUNK] = best_below >= worst_above + delta - epsilon
    return out


def covered(candidates: list[int], lattice: Lattice, epsilon: float, delta: float
            ) -> npt.NDArray[np.bool_]:
    """Which candidates the covering property (3.4) prunes: ``F <= C <= union(F_i)``, ``C != F``,
    for an expanded ``F`` and its expanded strict supersets ``F_i`` with
    ``acc(F) >= acc(F_i) + delta - epsilon``."""
    if not lattice.accuracy or not candidates:
        return np.zeros(len(candidates), dtype=bool)
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
    lattice = Lattice(n)
    for k in layer_order(n):
        layer = masks_of_size(n, k)
        skip = sandwiched(layer, lattice, epsilon, delta)
        if covering:
            skip |= covered(layer, lattice, epsilon, delta)
        lattice.pruned += int(skip.sum())
        todo = [mask for mask, pruned in zip(layer, skip.tolist(), strict=True) if not pruned]
        if prefetch is not None:
            prefetch(todo)
        for mask in todo:
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
