"""Building the polydominance index over item sizes (the device reads it with
``protocol.budget_index``).

Candidate cost curves cross only at the positive real roots of their pairwise differences;
between two consecutive crossings the cost order, hence the skyline, is fixed. PolyDom keeps a
break only where the skyline (the cost-sorted models each more accurate than every cheaper one)
actually changes; PolyDomIndexAll keeps every crossing (the paper's comparison point).
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


def build_index(points: Sequence[str], polys: Polys, accuracy: Sequence[float], *,
                index_all: bool = False) -> BudgetIndex:
    """The PolyDom index (or PolyDomIndexAll's) of models named by operating ``points``."""
    acc = np.asarray(accuracy, dtype=np.float64)
    cuts = crossings(polys)
    skylines = [skyline_at(polys, acc, s) for s in probe_sizes(cuts)]
    breaks: list[float] = []
    kept = [skylines[0]]
    for cut, sky in zip(cuts.tolist(), skylines[1:], strict=True):
        if index_all or sky != kept[-1]:
            breaks.append(cut)
            kept.append(sky)
    models = [IndexedModel(p, float(a), tuple(float(c) for c in row))
              for p, a, row in zip(points, acc.tolist(), polys, strict=True)]
    return BudgetIndex("polydom", models, breaks=breaks, skylines=kept)
