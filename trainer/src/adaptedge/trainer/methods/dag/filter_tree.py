"""The paper's Learn step (Wang et al., NIPS 2015, §2.1 and §4): a cost-sensitive filter tree
(Beygelzimer et al.) of logistic regressions on homogeneous polynomial features.

``--param policy=paper`` (``reduction="paper"``). The actions of a node are the leaves of a
balanced binary tree. Trained bottom-up: at an internal node j each training example's
left and right candidates are the actions the subtrees below already pick for it; the
binary logistic regression of node j learns "right is cheaper", each example weighted by
|cost(left) − cost(right)| (examples with equal costs drop out). A node whose examples all
agree, or carry no weight, gets a constant decision. Prediction descends from the root.

Features: the policy features (``graph.policy_features``) standardised, with a constant 1
appended, and all their monomials of degree exactly ``degree`` — a homogeneous polynomial
in ``[f, 1]``, i.e. every monomial of degree <= ``degree`` in f (degree 1: linear).

The hard descent as action scores (so the walk, the tie band and ONNX treat it like the
linear policy): with z_j the logit of internal node j and s_ja = +1 / −1 when action a lies
right / left below j (0 off its path), ``score_a = Σ_j min(0, s_ja z_j)``: 0 for the action
the descent reaches, ≤ −|z_j| for every other (j: where its path leaves the descent's). The
gap to the runner-up is the least |z_j| on the descent's path: the walk's margin then says
how near a float32 evaluation is to flipping a decision.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from adaptedge.protocol.walk import choose_rows
from adaptedge.trainer.methods.dag.graph import TIE_BAND
from adaptedge.trainer.methods.dag.problem import FloatArray, IntArray

DEFAULT_DEGREE = 2
CONSTANT_LOGIT = 1.0
"""Logit of an internal node all of whose weighted examples prefer one side."""


def monomials(F: FloatArray, degree: int) -> FloatArray:
    """Every monomial of degree exactly ``degree`` in the columns of ``F`` (which end with a
    constant 1), as the full tensor power flattened (repeats included; the weights of the
    repeats are zero after ``FilterTreePolicy.fit`` folds them), [N, m**degree]."""
    out = F
    for _ in range(degree - 1):
        out = (out[:, :, None] * F[:, None, :]).reshape(len(F), -1)
    return out


def _canonical(m: int, degree: int) -> IntArray:
    """Column indices (into ``monomials``) of the non-decreasing index tuples: one per
    distinct monomial."""
    grid = np.indices((m,) * degree).reshape(degree, -1).T
    return np.flatnonzero(np.all(np.diff(grid, axis=1) >= 0, axis=1))


def _tree(actions: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Internal nodes of a balanced tree over ``actions``, children before parents:
    (left leaves, right leaves) of each."""
    if len(actions) < 2:
        return []
    half = (len(actions) + 1) // 2
    left, right = list(actions[:half]), list(actions[half:])
    return [*_tree(left), *_tree(right), (left, right)]


@dataclass(frozen=True)
class FilterTreePolicy:
    """Scores ``Σ_j min(0, s_ja z_j)``, ``z = monomials([(F − mu)/sd, 1]) @ W + b``."""

    mu: FloatArray
    sd: FloatArray
    degree: int
    W: FloatArray
    """[m**degree, J] (m = policy features + 1), zero outside the canonical monomials."""
    b: FloatArray
    right: FloatArray
    """[J, A]: 1 where action a lies right below internal node j."""
    left: FloatArray
    """[J, A]: 1 where action a lies left below internal node j."""

    def expand(self, F: FloatArray) -> FloatArray:
        Z = np.hstack([(F - self.mu) / self.sd, np.ones((len(F), 1))])
        return monomials(Z, self.degree)

    def logits(self, F: FloatArray) -> FloatArray:
        return self.expand(F) @ self.W + self.b  # type: ignore[no-any-return]

    def scores(self, F: FloatArray) -> FloatArray:
        z = self.logits(F)
        # min(0, z) where the action is right, min(0, -z) where it is left
        return -(np.maximum(-z, 0.0) @ self.right + np.maximum(z, 0.0) @ self.left)  # type: ignore[no-any-return]

    def choose(self, F: FloatArray) -> IntArray:
        return choose_rows(self.scores(F), TIE_BAND)

    def keep(self, columns: Sequence[int]) -> FilterTreePolicy:
        cols = list(columns)
        return FilterTreePolicy(self.mu, self.sd, self.degree, self.W, self.b,
                                self.right[:, cols].copy(), self.left[:, cols].copy())

    @classmethod
    def fit(cls, F: FloatArray, costs: FloatArray, degree: int = DEFAULT_DEGREE
            ) -> FilterTreePolicy:
        """Train bottom-up on ``costs`` [N, A] (lower is better)."""
        n, n_actions = costs.shape
        mu, sd = F.mean(axis=0), F.std(axis=0)
        sd[sd < 1e-9] = 1.0
        m = F.shape[1] + 1
        nodes = _tree(list(range(n_actions)))
        W = np.zeros((m ** degree, len(nodes)))
        b = np.zeros(len(nodes))
        right = np.zeros((len(nodes), n_actions))
        left = np.zeros((len(nodes), n_actions))
        policy = cls(mu, sd, degree, W, b, right, left)
        canonical = _canonical(m, degree)
        Phi = policy.expand(F)[:, canonical]
        winner: dict[tuple[int, ...], IntArray] = {(a,): np.full(n, a) for a in range(n_actions)}
        rows = np.arange(n)
        for j, (lo, hi) in enumerate(nodes):
            left[j, lo], right[j, hi] = 1.0, 1.0
            a, c = winner[tuple(lo)], winner[tuple(hi)]
            gap = costs[rows, a] - costs[rows, c]  # > 0: the right candidate is cheaper
            W[canonical, j], b[j] = _fit_node(Phi, gap)
            winner[tuple(lo + hi)] = np.where(Phi @ W[canonical, j] + b[j] > 0, c, a)
        return policy


def _fit_node(Phi: FloatArray, gap: FloatArray) -> tuple[FloatArray, float]:
    """Importance-weighted logistic regression of "right is cheaper" on ``Phi`` (canonical
    monomials, the constant among them): (weights, bias)."""
    full = np.zeros(Phi.shape[1])
    weight = np.abs(gap)
    keep = weight > 0
    labels = (gap[keep] > 0).astype(np.int64)
    if not keep.any() or labels.min() == labels.max():
        side = float(np.sum(gap)) if keep.any() else 0.0
        return full, CONSTANT_LOGIT if side > 0 else -CONSTANT_LOGIT
    model = LogisticRegression(C=1.0, max_iter=300, fit_intercept=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(Phi[keep], labels, sample_weight=weight[keep] / weight[keep].mean())
    return np.asarray(model.coef_[0], dtype=np.float64), 0.0
