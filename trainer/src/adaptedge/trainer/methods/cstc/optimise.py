"""Algorithm 1 of Xu et al. (JMLR 2014): initialise top-down, block coordinate descent in
level order with Lemma 1's auxiliaries, prune on validation, then fine-tune the answering
classifiers without the cost term. (The paper prunes the initialised tree; here the nodes are
initialised as leaves under the full cost term, which keeps their expensive features out, so
pruning waits until the tree has specialised. With two classes a routing node is initialised
by ``lookahead.choose`` instead of its leaf fit.)

``fit_model`` works on standardised features; ``CostSensitiveModel`` holds the result with the
standardisation folded into the weights (raw float inputs, as the exported nodes see them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from adaptedge.trainer.methods.cstc.boosted import BoostedFeatures
from adaptedge.trainer.methods.cstc.node_solve import node_terms, solve_node
from adaptedge.trainer.methods.cstc.objective import (
    EPS,
    Answers,
    BoolArray,
    FloatArray,
    IntArray,
    Loss,
    Params,
    Problem,
    forward,
    group_sq,
    solve_aux,
)
from adaptedge.trainer.methods.cstc.structure import Shape
from adaptedge.trainer.methods.cstc.visits import visiting

PRUNE_TOLERANCE = 0.01
"""The first sensor-pruning round may give up this much validation accuracy (squared loss:
this much standardised validation MSE, 1% of the target's variance): the routes are
re-optimised on the kept sensors before the second, strict round."""
SHARP_ROUTE = 5.0
"""Initial routing score of a squared-sign node's validation quartiles: sigmoid(5) = 0.993."""
CLAMP = 1e-3
"""A node's group whose weights' norm falls below this is set to zero for good (the paper's
practical clamp of Lemma 1)."""


@dataclass(frozen=True)
class Schedule:
    sweeps: int = 3
    """Level-order passes of block coordinate descent."""
    inner: int = 2
    """Auxiliary / node-solve alternations per node and pass."""
    max_iter: int = 40
    """L-BFGS iterations per node solve."""


LOOKAHEAD_SCHEDULE = Schedule(sweeps=1, inner=1, max_iter=20)
"""The lighter fits that score ``lookahead`` candidates (block coordinate descent refines the
chosen ones)."""

@dataclass(frozen=True)
class CostSensitiveModel:
    """A trained tree or cascade on raw inputs: node ``k`` scores ``z = x W[k] + b[k]`` and
    routes to ``hi`` when ``z v[k] - theta[k] >= 0``."""

    shape: Shape
    W: tuple[FloatArray, ...]
    b: tuple[FloatArray, ...]
    v: tuple[FloatArray, ...]
    theta: FloatArray
    groups: tuple[tuple[int, ...], ...]
    """Per node, the sensor groups its classifier reads (non-zero weights)."""
    features: BoostedFeatures | None = None
    """Boosted-tree features (``W`` weighs their outputs), or None: ``W`` weighs raw columns."""

    def logits(self, k: int, X: FloatArray) -> FloatArray:
        phi = (np.asarray(X, dtype=np.float64) if self.features is None
               else self.features.transform(X))
        out: FloatArray = phi @ self.W[k] + self.b[k]
        return out

    def route_score(self, k: int, X: FloatArray) -> FloatArray:
        out: FloatArray = self.logits(k, X) @ self.v[k] - self.theta[k]
        return out

    def answering_node(self, X: FloatArray) -> IntArray:
        """The node whose classifier answers each row (hard routing)."""
        node = np.zeros(len(X), dtype=np.int64)
        for k in self.shape.alive():
            rows = np.flatnonzero(node == k)
            if not self.shape.routes(k) or not rows.size:
                continue
            up = self.route_score(k, X[rows]) >= 0
            lo = self.shape.lo[k]
            node[rows[up]] = self.shape.hi[k]
            if lo >= 0:
                node[rows[~up]] = lo
        return node


def hard_accuracy(shape: Shape, P: Params, X: FloatArray, y: Answers,
                  Z: list[FloatArray] | None = None, loss: Loss = "logistic") -> float:
    """Validation score of hard routing: accuracy, or with the squared loss minus the mean
    squared error (higher is better either way)."""
    visit = visiting(shape, P, X, Z)
    right = np.zeros(len(X))
    for k in shape.terminals():
        z = X @ P.W[k] + P.b[k] if Z is None else Z[k]
        answers = visit[k] * (1 - (0 if not (shape.kind == "cascade" and shape.routes(k))
                                   else visit[shape.hi[k]]))
        if loss == "squared":
            right -= answers * (z[:, 0] - y) ** 2
            continue
        pred = (z[:, 0] > 0).astype(int) if z.shape[1] == 1 else z.argmax(axis=1)
        right += answers * (pred == y)
    return float(right.mean())


def block(prob: Problem, shape: Shape, P: Params, k: int, schedule: Schedule,
          with_cost: bool = True) -> None:
    """Alternate Lemma 1's auxiliaries and node ``k``'s solve; clamp dead groups."""
    for _ in range(schedule.inner):
        st = forward(prob, shape, P)
        aux = solve_aux(prob, shape, P, st)
        solve_node(prob, shape, P, aux, k, node_terms(prob, shape, P, st, aux, k, with_cost),
                   schedule.max_iter)
        if with_cost:
            dead = np.sqrt(group_sq(prob, P.W[k])) < CLAMP
            P.active[k] &= ~dead
            P.W[k][prob.in_groups(dead)] = 0.0


def initialise(prob: Problem, shape: Shape, val: tuple[FloatArray, Answers],
               schedule: Schedule, lookahead: bool = False) -> Params:
    """Top-down: each node trained as if it were a leaf, then its threshold set to split the
    validation rows reaching it evenly. ``lookahead``: a routing node's classifier is chosen
    among candidates by the subtree it leads to (``lookahead.choose``)."""
    from adaptedge.trainer.methods.cstc.lookahead import choose

    d, m, G = prob.X.shape[1], prob.Y.shape[1], prob.n_groups
    P = Params([np.zeros((d, m)) for _ in range(shape.n_nodes)],
               [np.zeros(m) for _ in range(shape.n_nodes)],
               [np.full(m, prob.route_slope) for _ in range(shape.n_nodes)],
               np.zeros(shape.n_nodes), [np.ones(G, dtype=bool) for _ in range(shape.n_nodes)])

    def fit(prob: Problem, shape: Shape, P: Params, k: int, mask: BoolArray | None,
            schedule: Schedule = schedule) -> None:
        if k > 0:
            P.b[k] = P.b[shape.parent(k)].copy()
        P.W[k][:] = 0.0
        P.active[k] = np.ones(G, dtype=bool) if mask is None else mask.copy()
        fit_leaf(prob, shape, P, k, schedule)
        if shape.routes(k):
            set_threshold(shape, P, k, val[0], sharp=prob.loss == "squared-sign")

    for k in shape.alive():
        if lookahead and shape.routes(k):
            P = choose(prob, shape, P, k, partial(fit, schedule=LOOKAHEAD_SCHEDULE))
        else:
            fit(prob, shape, P, k, None)
    return P


def fit_leaf(prob: Problem, shape: Shape, P: Params, k: int, schedule: Schedule) -> None:
    """Node ``k`` trained as if it were a leaf: without the cost term, then with it."""
    warm = replace(prob, lam=0.0, rho=EPS * EPS)
    block(warm, shape.cut(k), P, k, replace(schedule, inner=1), with_cost=False)
    block(prob, shape.cut(k), P, k, schedule)


def set_threshold(shape: Shape, P: Params, k: int, X_val: FloatArray, sharp: bool = False
                  ) -> None:
    """Node ``k``'s threshold (and, with several outputs, routing direction) splitting the
    validation rows that reach it: halfway between the quartiles of their routing score.
    ``sharp`` (one output): the routing slope ``v`` also set so that those quartiles route
    with probability ``sigmoid(SHARP_ROUTE)``."""
    m = len(P.b[k])
    reach = visiting(shape, P, X_val)[k] > 0
    z = X_val[reach] @ P.W[k] + P.b[k] if reach.any() else np.zeros((1, m))
    if m > 1:
        centred = z - z.mean(axis=0)
        direction = np.linalg.svd(centred, full_matrices=False)[2][0]
        P.v[k] = direction * np.sign(direction[np.abs(direction).argmax()])
    s = z @ P.v[k]
    low, high = float(np.quantile(s, 0.25)), float(np.quantile(s, 0.75))
    if sharp and m == 1 and high - low > 1e-6:
        # the quartiles at -/+ SHARP_ROUTE: a weak locator's small prediction spread would
        # otherwise route softly and no child could specialise
        scale = 2 * SHARP_ROUTE / (high - low)
        P.v[k], s, low, high = P.v[k] * scale, s * scale, low * scale, high * scale
    P.theta[k] = (low + high) / 2


def prune(prob: Problem, shape: Shape, P: Params, val: tuple[FloatArray, Answers]) -> Shape:
    """Bottom-up, cut every routing node whose removal does not lower validation accuracy."""
    best = hard_accuracy(shape, P, *val, loss=prob.loss)
    for k in reversed(shape.alive()):
        if not shape.routes(k) or any(shape.routes(c) for c in (shape.hi[k], shape.lo[k])
                                      if c >= 0 and shape.kind == "tree"):
            continue
        candidate = shape.cut(k)
        score = hard_accuracy(candidate, P, *val, loss=prob.loss)
        if score >= best:
            shape, best = candidate, score
    return shape


def fit_params(prob: Problem, shape: Shape, val: tuple[FloatArray, Answers],
               schedule: Schedule, lookahead: bool = False) -> tuple[Shape, Params]:
    """Initialise, optimise, then twice: fine-tune the leaves, prune nodes and sensor groups; returns the final shape and parameters."""
    P = initialise(prob, shape, val, schedule, lookahead)
    for _ in range(schedule.sweeps):
        for k in shape.alive():
            block(prob, shape, P, k, schedule)
    fine = replace(prob, rho=EPS)
    for round_ in range(2):  # fine-tune the answering leaves, prune nodes and sensors
        for k in [k for k in shape.terminals() if not shape.routes(k)]:
            block(fine, shape, P, k, replace(schedule, inner=1), with_cost=False)
        shape = prune(prob, shape, P, val)
        prune_groups(prob, shape, P, val, PRUNE_TOLERANCE if round_ == 0 else 0.0)
        for k in shape.alive():  # re-optimise on the kept sensors
            block(prob, shape, P, k, replace(schedule, inner=1))
    for k in [k for k in shape.terminals() if not shape.routes(k)]:
        block(fine, shape, P, k, replace(schedule, inner=1), with_cost=False)
    return shape, P


def prune_groups(prob: Problem, shape: Shape, P: Params, val: tuple[FloatArray, Answers],
                 tolerance: float = 0.0) -> None:
    """Root first, most expensive first (``Problem.prune_order``): drop a node's group when
    zeroing its weights does not lower validation accuracy by more than ``tolerance`` (in
    all). (The relaxed cost is linear in a weight's size, so small weights on expensive
    sensors survive the optimisation yet cost their full price at test time; this is the
    paper's validation pruning applied to sensors, or trees, as well as nodes.) With boosted
    features each try updates the node's validation logits by the dropped columns only."""
    X, y = val
    floor = hard_accuracy(shape, P, X, y, loss=prob.loss) - tolerance
    Z = None if prob.member is None else [X @ W + b for W, b in zip(P.W, P.b, strict=True)]
    for k in shape.alive():
        for g in prob.prune_order(P.active[k]):
            cols = prob.in_groups(np.arange(prob.n_groups) == g)
            saved = P.W[k][cols].copy()
            P.W[k][cols] = 0.0
            if Z is not None:
                kept = Z[k]
                Z[k] = kept - X[:, cols] @ saved
            if hard_accuracy(shape, P, X, y, Z, prob.loss) >= floor:
                P.active[k][g] = False
            else:
                P.W[k][cols] = saved
                if Z is not None:
                    Z[k] = kept
