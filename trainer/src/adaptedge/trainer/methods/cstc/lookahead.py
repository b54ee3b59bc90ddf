"""Initialising a routing node by a two-level look-ahead (a declared departure from Xu et al.'s
§3.4.2, which initialises every node as the leaf fit of its rows).

A node routes on its own prediction, so the leaf fit routes rows by their predicted label:
on data whose label a decoy predicts (or an expert predicts on part of the rows) that split
mixes the regions a cheap locator would separate, every leaf below then needs several experts,
and block coordinate descent cannot leave that basin. Here node ``k``'s routing classifier is
chosen among candidates: its leaf fit on all sensor groups and its leaf fit on each single
group (the ``LOOKAHEAD_GROUPS`` with the largest training-loss reduction per unit cost). Each
candidate's split is scored by the training objective (loss and relaxed cost, ``total``) of
the subtree it leads to, two levels deep: each routing child takes its own best candidate
with its children fitted as leaves, a terminal child is fitted as a leaf. Only training rows
score candidates; validation rows set each split's threshold, as in ``initialise``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np

from adaptedge.trainer.methods.cstc.objective import Params, Problem, group_sq
from adaptedge.trainer.methods.cstc.structure import Shape
from adaptedge.trainer.methods.cstc.visits import visiting

LOOKAHEAD_GROUPS = 6
"""Single-group candidates per routing node (besides the leaf fit on every group)."""

FitNode = Callable[[Problem, Shape, Params, int, "np.ndarray | None"], None]
"""Fit node ``k`` as a leaf (on the given group mask, or every active group) and, if it routes
in the shape, set its threshold."""


def candidate_groups(prob: Problem, P: Params, reach: np.ndarray, k: int) -> list[int]:
    """The groups whose one-group least-squares fit on the rows reaching ``k`` lowers the
    training loss most per unit cost (at most ``LOOKAHEAD_GROUPS``)."""
    rows = reach > 0.5
    if rows.sum() < 2:
        return []
    X, y = prob.X[rows], prob.Y[rows, 0]
    yc = y - y.mean()
    gain = np.zeros(prob.n_groups)
    for g in np.flatnonzero(P.active[k]):
        Xg = X[:, prob.in_groups(np.arange(prob.n_groups) == g)]
        Xg = Xg - Xg.mean(axis=0)
        coef = np.linalg.lstsq(Xg, yc, rcond=None)[0]
        gain[g] = float(yc @ (Xg @ coef)) / max(float(prob.costs[g]), 1e-9)
    order = [int(g) for g in np.argsort(-gain) if gain[g] > 0]
    return order[:LOOKAHEAD_GROUPS]


READ = 0.05
"""In scoring, a group counts as read when its standardised weights' norm is at least this
(smaller weights move a prediction by under 5% of a label unit per standard deviation;
validation pruning decides on them later)."""


def true_objective(prob: Problem, shape: Shape, P: Params, k: int) -> float:
    """The unrelaxed objective of the subtree under ``k`` on the training rows reaching it:
    squared loss of the answering node (hard routing) plus ``lambda`` times the cost of the
    groups read on each row's path (``READ``)."""
    visit = visiting(shape, P, prob.X)
    value = 0.0
    for t in shape.terminals():
        if k not in shape.path(t):
            continue
        answered = visit[t] - (visit[shape.hi[t]] if shape.routes(t) else 0.0)  # cascade
        rows = answered > 0.5
        if not rows.any():
            continue
        z = prob.X[rows] @ P.W[t] + P.b[t]
        read = np.zeros(prob.n_groups, dtype=bool)
        for j in shape.path(t):
            read |= np.sqrt(group_sq(prob, P.W[j])) >= READ
        loss = float((prob.weight[rows] * ((z - prob.Y[rows]) ** 2).sum(axis=1)).sum())
        value += loss + prob.lam * float(prob.costs[read].sum()) * float(rows.sum())
    return value / len(prob.X)


def _reach(shape: Shape, P: Params, prob: Problem, k: int) -> np.ndarray:
    return visiting(shape, P, prob.X)[k]


def _children(shape: Shape, k: int) -> list[int]:
    return [c for c in (shape.hi[k], shape.lo[k]) if c >= 0]


def _frontier(shape: Shape, k: int, levels: int) -> Shape:
    """``shape`` with every node ``levels`` below ``k`` made a terminal."""
    layer = [k]
    for _ in range(levels):
        layer = [c for j in layer for c in _children(shape, j)]
    for j in layer:
        shape = shape.cut(j)
    return shape


def choose(prob: Problem, shape: Shape, P: Params, k: int, fit: FitNode, levels: int = 2
           ) -> Params:
    """``P`` with node ``k`` (a routing node) initialised by the candidate whose ``levels``-deep
    subtree has the lowest training objective; nodes below ``k`` are left as they were."""
    scope = _frontier(shape, k, levels)
    masks: list[np.ndarray | None] = [None]
    for g in candidate_groups(prob, P, _reach(shape, P, prob, k), k):
        masks.append(np.arange(prob.n_groups) == g)
    best: tuple[float, Params] | None = None
    for mask in masks:
        Q = copy.deepcopy(P)
        fit(prob, scope, Q, k, mask)
        for child in _children(scope, k):
            if levels > 1 and scope.routes(child):
                Q = choose(prob, scope, Q, child, fit, levels - 1)
                for grandchild in _children(scope, child):
                    fit(prob, scope, Q, grandchild, None)
            else:
                fit(prob, scope, Q, child, None)
        score = true_objective(prob, _frontier(scope, k, levels), Q, k)
        if best is None or score < best[0]:
            best = (score, Q)
    assert best is not None
    out = copy.deepcopy(P)
    out.W[k], out.b[k], out.v[k] = best[1].W[k], best[1].b[k], best[1].v[k]
    out.theta[k], out.active[k] = best[1].theta[k], best[1].active[k]
    return out
