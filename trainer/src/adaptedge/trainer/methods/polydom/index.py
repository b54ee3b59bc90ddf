"""Building the polydominance index over item sizes (the device reads it with
``protocol.budget_index``).

Candidate cost curves cross only at the positive real roots of their pairwise differences;
between two consecutive crossings the cost order, hence the skyline, is fixed. PolyDom keeps a
break only where the skyline (the cost-sorted models each more accurate than every cheaper one)
actually changes, found by the paper's Algorithm 3 (``sweep``): the curves ordered by cost at
size 0+, a priority queue of the next crossing of each ADJACENT pair only, each popped crossing
swapping its two curves, and Theorem 3.13's test of whether that swap changes the skyline (with
``M`` the best accuracy of the curves cheaper than both, the swap changes which of the two is on
the skyline or nothing). PolyDomIndexAll keeps every crossing of every pair (the paper's
comparison point).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.budget_index import BudgetIndex, IndexedModel

Polys = npt.NDArray[np.float64]


def crossings(polys: Polys) -> npt.NDArray[np.float64]:
    """Sorted distinct sizes > 0 where two cost curves meet (and may swap order)."""
    points: list[float] = []
    for i in range(len(polys)):
        diff = polys[i + 1:] - polys[i]
        for d in diff:
            nz = np.flatnonzero(np.abs(d) > 1e-15)
            if nz.size == 0 or nz.max() == 0:
                continue
            roots = np.roots(d[: nz.max() + 1][::-1])
            real = roots[np.abs(roots.imag) <= 1e-9 * (1 + np.abs(roots.real))].real
            points.extend(float(r) for r in real if r > 0)
    return np.unique(np.round(np.asarray(points, dtype=np.float64), 12))


def skyline_at(polys: Polys, accuracy: npt.NDArray[np.float64], size: float) -> list[int]:
    """Model ids by ascending cost at ``size`` (ties: most accurate first), each kept only if
    more accurate than every cheaper one."""
    cost = polys @ size ** np.arange(polys.shape[1], dtype=np.float64)
    order = np.lexsort((-accuracy, cost))
    out, best = [], -np.inf
    for m in order.tolist():
        if accuracy[m] > best:
            out.append(m)
            best = accuracy[m]
    return out


def probe_sizes(breaks: npt.NDArray[np.float64]) -> list[float]:
    """One size inside each interval cut by ``breaks``."""
    if not breaks.size:
        return [1.0]
    edges = np.concatenate([[0.0], breaks, [breaks[-1] * 2 + 1]])
    return [float((a + b) / 2) for a, b in pairwise(edges)]


def next_crossing(polys: Polys, a: int, b: int, after: float) -> float | None:
    """The least size > ``after`` where curves ``a`` and ``b`` swap order (a sign change of
    their difference: roots of even multiplicity touch without swapping)."""
    d = polys[a] - polys[b]
    nz = np.flatnonzero(np.abs(d) > 1e-15)
    if nz.size == 0 or nz.max() == 0:
        return None
    roots = np.roots(d[: nz.max() + 1][::-1])
    real = roots[np.abs(roots.imag) <= 1e-9 * (1 + np.abs(roots.real))].real
    powers = np.arange(len(d), dtype=np.float64)
    best = None
    for r in sorted(float(x) for x in real if x > after * (1 + 1e-12) + 1e-12):
        h = 1e-7 * (1 + abs(r))
        lo, hi = d @ (r - h) ** powers, d @ (r + h) ** powers
        if lo * hi < 0:
            best = r
            break
    return best


def _start_order(polys: Polys, acc: npt.NDArray[np.float64]) -> list[int]:
    """Curves by cost just above size 0 (coefficients compared lowest degree first; equal
    curves most accurate first, as ``skyline_at`` breaks cost ties)."""
    keys = [-acc, *(polys[:, j] for j in reversed(range(polys.shape[1])))]
    return [int(i) for i in np.lexsort(keys)]


def sweep(polys: Polys, acc: npt.NDArray[np.float64]) -> tuple[list[float], list[list[int]], int]:
    """Algorithm 3: the sizes where the skyline changes, the skyline before the first and after
    each, and how many crossings were popped."""
    import heapq

    order = _start_order(polys, acc)
    pos = {m: i for i, m in enumerate(order)}
    heap: list[tuple[float, int, int]] = []

    def push(i: int, x: float) -> None:  # the pair at positions i, i + 1
        if 0 <= i < len(order) - 1:
            r = next_crossing(polys, order[i], order[i + 1], x)
            if r is not None:
                heapq.heappush(heap, (r, order[i], order[i + 1]))

    for i in range(len(order) - 1):
        push(i, 0.0)
    breaks: list[float] = []
    skylines = [_skyline(order, acc)]
    popped = 0
    while heap:
        x, a, b = heapq.heappop(heap)
        i = pos[a]
        if i + 1 >= len(order) or order[i + 1] != b:
            continue  # stale: no longer adjacent
        popped += 1
        best = max((acc[m] for m in order[:i]), default=-np.inf)
        before = (acc[a] > best, acc[b] > max(best, acc[a]))
        order[i], order[i + 1] = b, a
        pos[a], pos[b] = i + 1, i
        if before != (acc[a] > max(best, acc[b]), acc[b] > best):  # Theorem 3.13
            breaks.append(x)
            skylines.append(_skyline(order, acc))
        push(i - 1, x)
        push(i, x)
        push(i + 1, x)
    return (*_merged(breaks, skylines), popped)


def _merged(breaks: list[float], skylines: list[list[int]]
            ) -> tuple[list[float], list[list[int]]]:
    """Several pairs crossing at one size (sets sharing features cross where their
    differences do) swap one by one there: keep the skyline after the last of them, and only
    the sizes where it differs from the one before."""
    out_b: list[float] = []
    out_s = [skylines[0]]
    for x, sky in zip(breaks, skylines[1:], strict=True):
        if out_b and abs(x - out_b[-1]) <= 1e-9 * (1 + abs(x)):
            out_s[-1] = sky
            if len(out_s) >= 2 and out_s[-1] == out_s[-2]:
                out_b.pop()
                out_s.pop()
            continue
        if sky != out_s[-1]:
            out_b.append(x)
            out_s.append(sky)
    return out_b, out_s


def _skyline(order: Sequence[int], acc: npt.NDArray[np.float64]) -> list[int]:
    out, best = [], -np.inf
    for m in order:
        if acc[m] > best:
            out.append(int(m))
            best = acc[m]
    return out


def build_index(points: Sequence[str], polys: Polys, accuracy: Sequence[float], *,
                index_all: bool = False) -> BudgetIndex:
    """The PolyDom index (Algorithm 3's sweep) or PolyDomIndexAll's (a skyline after every
    crossing of every pair) of models named by operating ``points``."""
    acc = np.asarray(accuracy, dtype=np.float64)
    if index_all:
        cuts = crossings(polys)
        breaks = cuts.tolist()
        kept = [skyline_at(polys, acc, s) for s in probe_sizes(cuts)]
    else:
        breaks, kept, _ = sweep(polys, acc)
    models = [IndexedModel(p, float(a), tuple(float(c) for c in row))
              for p, a, row in zip(points, acc.tolist(), polys, strict=True)]
    return BudgetIndex("polydom", models, breaks=breaks, skylines=kept)
