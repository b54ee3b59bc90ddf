"""The CSTC / CSCC / Cronus objective (Xu et al., JMLR 2014, eqs. 12 and 19, and Cronus's).

Every node ``k`` has a linear model ``z = x W + b`` (one output for two classes or a
regression, one per class otherwise) and, if it routes, a routing score ``s = z v - theta``:
``p(hi) = sigmoid(s)``. With one output ``v`` is a fixed slope (``Problem.route_slope``;
initialisation may steepen it per node), so a node routes on its own prediction as in the
paper (``p(upper) = sigmoid(x beta - theta)``); with more classes ``v`` is learned (the
routing direction in the node's class-score space). ``Problem.loss``: ``"squared-sign"``, the
paper's squared loss on -1/+1 labels (two classes); ``"squared"``, its regression loss on a
standardised target; ``"logistic"``, the softmax loss (more than two classes, or on request).
Every node is solved by L-BFGS (the paper's iterative solver for internal nodes).

Loss weights: CSTC weights node ``k``'s loss by its path probability ``p_k``; CSCC and Cronus
by the probability of exiting at ``k``. The cost term charges each sensor group ``g`` once per
exit path ``t``: ``lambda * P_t * sum_g c_g sqrt(sum_{j on path t} |W_j[g]|^2)`` (a sensor
reused along a path is free); Cronus instead charges ``lambda * sum_g c_g sqrt(sum_k (P_k
|W_k[g]|)^2)``. Square roots and the L1 term ``rho |W|`` go through Lemma 1 with auxiliary
variables (``eta`` per path and group, ``gamma`` per weight), solved in closed form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit, log_softmax, softmax

from adaptedge.trainer.methods.cstc.structure import Shape

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
Variant = Literal["cstc", "cscc", "cronus"]
Loss = Literal["logistic", "squared", "squared-sign"]
"""``squared-sign``: the paper's squared loss on -1/+1 labels (binary classification, the class
is the prediction's sign); ``squared``: regression on a standardised target."""
Answers = IntArray | FloatArray
"""Validation answers: class indices (logistic) or standardised targets (squared)."""
EPS = 1e-4
"""Lemma 1 needs g > 0: auxiliaries are clamped to at least this (the paper's 1e-4)."""


@dataclass(frozen=True)
class Problem:
    X: FloatArray
    """[n, d] standardised features."""
    Y: FloatArray
    """[n, m] targets: the label (m = 1, two classes) or one-hot rows."""
    weight: FloatArray
    """[n] per-row loss weight (class weights)."""
    group_of: IntArray
    """[d] the sensor group of each column."""
    costs: FloatArray
    """[G] cost of each group (normalised to mean 1 over groups)."""
    lam: float
    rho: float
    variant: Variant
    member: FloatArray | None = None
    """[d, G] 0/1, or None (each column in its ``group_of`` group only). With boosted-tree
    features a column (one tree's output) is in several groups: its tree's own and those of
    the sensors the tree reads (``group_of`` is then unused)."""
    tree_groups: int = 0
    """With ``member``: the last ``tree_groups`` groups are the trees' own."""
    loss: Loss = "logistic"
    """"squared": regression on ``Y`` [n, 1] (standardised targets); "squared-sign": ``Y``
    [n, 1] holds -1/+1 labels."""
    route_slope: float = 1.0
    """The fixed ``v`` of a one-output node: ``p(hi) = sigmoid(route_slope * z - theta)``.
    1 for classification (the paper's); a regressor's standardised prediction spans a few
    units, so its routing needs a steeper slope to be near-hard (``regressor.ROUTE_SLOPE``)."""

    @property
    def n_groups(self) -> int:
        return len(self.costs)

    def group_sums(self, per_column: FloatArray, cols: IntArray | None = None) -> FloatArray:
        """[G] sums of ``per_column`` (one value per column ``cols``, default all) by group."""
        if self.member is None:
            of = self.group_of if cols is None else self.group_of[cols]
            out: FloatArray = np.bincount(of, weights=per_column, minlength=self.n_groups
                                          ).astype(np.float64)
            return out
        member = self.member if cols is None else self.member[cols]
        return per_column @ member

    def column_sums(self, per_group: FloatArray, cols: IntArray) -> FloatArray:
        """Per column in ``cols``: the sum of ``per_group`` over the groups it belongs to."""
        if self.member is None:
            return per_group[self.group_of[cols]]
        return self.member[cols] @ per_group

    def prune_order(self, active: BoolArray) -> list[int]:
        """The active groups validation pruning tries to drop, most expensive first: the
        sensor groups, or with boosted features the trees' own groups (the last ones), each
        priced with the sensors it reads (dropping a sensor would drop every tree on it)."""
        if self.member is None:
            return sorted(np.flatnonzero(active).tolist(), key=lambda g: -self.costs[g])
        first = self.n_groups - self.tree_groups
        trees = [g for g in range(first, self.n_groups) if active[g]]
        price = {g: float(self.costs @ (self.member[self.member[:, g] > 0].sum(axis=0) > 0))
                 for g in trees}
        return sorted(trees, key=lambda g: -price[g])

    def in_groups(self, groups: BoolArray) -> BoolArray:
        """[d] columns that belong to any of ``groups`` ([G] mask)."""
        if self.member is None:
            return groups[self.group_of]
        out: BoolArray = np.asarray((self.member[:, groups] > 0).any(axis=1), dtype=bool)
        return out


@dataclass
class Params:
    W: list[FloatArray]
    b: list[FloatArray]
    v: list[FloatArray]
    theta: FloatArray
    active: list[BoolArray]
    """Per node, the groups it may still use (a group clamped to zero stays out)."""


@dataclass
class State:
    z: list[FloatArray]
    loss: list[FloatArray]
    dloss: list[FloatArray]
    q: list[FloatArray]
    p: list[FloatArray]


def logistic(z: FloatArray, Y: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per-row loss and its gradient in ``z``."""
    if z.shape[1] == 1:
        loss = np.logaddexp(0.0, z[:, 0]) - Y[:, 0] * z[:, 0]
        return loss, expit(z) - Y
    log_p, p = log_softmax_and_softmax(z)
    log_p *= Y  # in place: each N x C temporary is a fresh allocation and its page faults
    loss = log_p.sum(axis=1)
    p -= Y
    return np.negative(loss, out=loss), p


def log_softmax_and_softmax(z: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``scipy.special.log_softmax(z, axis=1)`` and ``softmax(z, axis=1)``, the same values bit
    for bit, from one shift, exponential and sum (each scipy function does its own: most of
    a CSTC fit on letter's 26 classes). A row whose maximum is not finite goes to scipy, which
    shifts it differently for each."""
    z_max = z.max(axis=1, keepdims=True)
    if not np.isfinite(z_max).all():
        return log_softmax(z, axis=1), softmax(z, axis=1)
    shifted = z - z_max
    exp_shifted = np.exp(shifted)
    total = exp_shifted.sum(axis=1, keepdims=True)
    return (np.subtract(shifted, np.log(total), out=shifted),
            np.divide(exp_shifted, total, out=exp_shifted))


def squared(z: FloatArray, Y: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per-row squared loss ``(z - y)^2`` (one output) and its gradient in ``z``."""
    r = z - Y
    return (r ** 2).sum(axis=1), 2.0 * r


def loss_of(prob: Problem, z: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The problem's per-row loss of outputs ``z`` and its gradient."""
    return logistic(z, prob.Y) if prob.loss == "logistic" else squared(z, prob.Y)


def group_sq(prob: Problem, W: FloatArray) -> FloatArray:
    """[G] squared norm of each group's weights."""
    return prob.group_sums((W ** 2).sum(axis=1))


def forward(prob: Problem, shape: Shape, P: Params) -> State:
    n = len(prob.X)
    st = State([], [], [], [], [])
    for k in range(shape.n_nodes):
        z = prob.X @ P.W[k] + P.b[k]
        loss, dloss = loss_of(prob, z)
        st.z.append(z)
        st.loss.append(loss)
        st.dloss.append(dloss)
        st.q.append(expit(z @ P.v[k] - P.theta[k]) if shape.routes(k) else np.zeros(n))
        st.p.append(np.zeros(n))
    st.p[0] = np.ones(n)
    for k in shape.alive():
        if shape.routes(k):
            st.p[shape.hi[k]] = st.p[k] * st.q[k]
            if shape.lo[k] >= 0:
                st.p[shape.lo[k]] = st.p[k] * (1 - st.q[k])
    return st


@dataclass
class Aux:
    eta: dict[int, FloatArray]
    """Terminal node -> [G] path auxiliaries (CSTC, CSCC)."""
    gamma: list[FloatArray]
    """Per node, [d, m] L1 auxiliaries."""
    kappa: list[FloatArray]
    """Per node, [G] fixed quadratic cost coefficients (Cronus)."""


def solve_aux(prob: Problem, shape: Shape, P: Params, st: State) -> Aux:
    """The closed-form minimisers of Lemma 1's auxiliaries for the current weights."""
    sq = [group_sq(prob, W) for W in P.W]
    eta: dict[int, FloatArray] = {}
    kappa = [np.zeros(prob.n_groups) for _ in P.W]
    if prob.variant == "cronus":
        reach = [float(p.mean()) for p in st.p]
        total = sum(reach[k] ** 2 * sq[k] for k in shape.alive())
        eta_g = np.maximum(np.sqrt(total), EPS)
        for k in shape.alive():
            kappa[k] = prob.lam * prob.costs * reach[k] ** 2 / eta_g
    else:
        for t in shape.terminals():
            eta[t] = np.maximum(np.sqrt(sum(sq[j] for j in shape.path(t))), EPS)
    gamma = [np.maximum(np.abs(W), EPS) for W in P.W]
    return Aux(eta, gamma, kappa)


def terminal_cost(prob: Problem, shape: Shape, P: Params, aux: Aux, t: int) -> float:
    """``sum_g c_g * (A_g / eta_g + eta_g) / 2`` for exit path ``t`` (0 for Cronus)."""
    if prob.variant == "cronus":
        return 0.0
    A = sum(group_sq(prob, P.W[j]) for j in shape.path(t))
    return float((prob.costs * 0.5 * (A / aux.eta[t] + aux.eta[t])).sum())


def downstream(prob: Problem, shape: Shape, P: Params, st: State, aux: Aux
               ) -> tuple[dict[int, FloatArray], dict[int, FloatArray]]:
    """Per node ``k`` (given a row reached it): ``R[k]`` [n] its subtree's loss + cost, and
    ``H[k]`` [n, G] the coefficient of ``|W_j[g]|^2 / 2`` for any ancestor ``j`` in it."""
    R: dict[int, FloatArray] = {}
    H: dict[int, FloatArray] = {}
    n, zero = len(prob.X), np.zeros(prob.n_groups)
    for k in reversed(shape.alive()):
        own = prob.weight * st.loss[k]
        self_cost = terminal_cost(prob, shape, P, aux, k) if shape.is_terminal(k) else 0.0
        self_h = (prob.lam * prob.costs / aux.eta[k]
                  if shape.is_terminal(k) and prob.variant != "cronus" else zero)
        if not shape.routes(k):
            R[k] = own + prob.lam * self_cost
            H[k] = np.broadcast_to(self_h, (n, prob.n_groups))
            continue
        q = st.q[k]
        hi, lo = shape.hi[k], shape.lo[k]
        if shape.kind == "cascade":
            R[k] = (1 - q) * (own + prob.lam * self_cost) + q * R[hi]
            H[k] = (1 - q)[:, None] * self_h + q[:, None] * H[hi]
        else:
            R[k] = own + q * R[hi] + (1 - q) * R[lo]
            H[k] = q[:, None] * H[hi] + (1 - q)[:, None] * H[lo]
    return R, H


def total(prob: Problem, shape: Shape, P: Params) -> float:
    """The objective at ``P`` (auxiliaries at their minimisers: the exact relaxed objective)."""
    st = forward(prob, shape, P)
    aux = solve_aux(prob, shape, P, st)
    R, _ = downstream(prob, shape, P, st, aux)
    l1 = sum(float(np.abs(P.W[k]).sum()) for k in shape.alive())
    out = float(R[0].mean()) + prob.rho * l1
    if prob.variant == "cronus":
        out += sum(float(aux.kappa[k] @ group_sq(prob, P.W[k])) for k in shape.alive())
    return out
