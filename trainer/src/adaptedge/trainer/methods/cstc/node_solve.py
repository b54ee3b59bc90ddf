"""One block of Algorithm 1: minimise the objective over one node's parameters.

All other nodes and the auxiliary variables are fixed, so the node's problem is smooth:
``(1/n) sum_i p_i [a_i (w_i l_i + S.|W|^2/2) + q_i R_hi + (1 - q_i) R_lo] + kappa.|W|^2/2
+ rho W^2 / (2 gamma)``, with ``a_i = 1`` (CSTC) or the exit probability ``1 - q_i`` (a
cascade node), ``S`` the node's own exit path's cost coefficients and ``R_hi``, ``R_lo`` the
children's subtree values, whose cost part grows as ``H.|W|^2/2``. Solved by L-BFGS over the
node's active columns, its bias, its routing threshold and (multi-class) routing direction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from adaptedge.trainer.methods.cstc.objective import (
    Aux,
    FloatArray,
    IntArray,
    Params,
    Problem,
    State,
    downstream,
    group_sq,
    loss_of,
    terminal_cost,
)
from adaptedge.trainer.methods.cstc.structure import Shape


@dataclass
class NodeTerms:
    p: FloatArray
    exit_scaled: bool
    self_const: float
    """lambda * the node's own exit-path cost without its own weights' part."""
    self_h: FloatArray
    kappa: FloatArray
    r_hi: FloatArray
    h_hi: FloatArray
    r_lo: FloatArray
    h_lo: FloatArray


def node_terms(prob: Problem, shape: Shape, P: Params, st: State, aux: Aux, k: int,
               with_cost: bool = True) -> NodeTerms:
    """Everything node ``k``'s block needs from the rest of the model."""
    n, G = len(prob.X), prob.n_groups
    zeros_h = np.zeros((n, G))
    R, H = downstream(prob, shape, P, st, aux)
    old = group_sq(prob, P.W[k])
    terminal = shape.is_terminal(k) and prob.variant != "cronus" and with_cost
    self_h = prob.lam * prob.costs / aux.eta[k] if terminal else np.zeros(G)
    self_const = (prob.lam * terminal_cost(prob, shape, P, aux, k) - 0.5 * float(self_h @ old)
                  if terminal else 0.0)
    branches = []
    for child in (shape.hi[k], shape.lo[k]):
        if child < 0 or not shape.routes(k):
            branches.append((np.zeros(n), zeros_h))
            continue
        h = H[child] if with_cost else zeros_h
        branches.append((R[child] - 0.5 * H[child] @ old, h))
    return NodeTerms(st.p[k], shape.kind == "cascade" and shape.routes(k), self_const, self_h,
                     aux.kappa[k] if with_cost else np.zeros(G),
                     branches[0][0], branches[0][1], branches[1][0], branches[1][1])


Unpack = Callable[[FloatArray], tuple[FloatArray, FloatArray, FloatArray, float]]


def node_objective(prob: Problem, shape: Shape, P: Params, aux: Aux, k: int, terms: NodeTerms
                   ) -> tuple[Callable[[FloatArray], tuple[float, FloatArray]], FloatArray,
                              Unpack, IntArray]:
    """Node ``k``'s smooth block objective with its gradient, the start point, how to unpack
    a point into (W on the active columns, b, v, theta), and the active columns."""
    X, Y, n = prob.X, prob.Y, len(prob.X)
    cols = np.flatnonzero(~prob.in_groups(~P.active[k]))
    Xa = X[:, cols]
    m = Y.shape[1]
    routes = shape.routes(k)
    # two classes: v = 1 (the paper's sigmoid(x beta - theta)); more classes: v is learned, the
    # routing direction in class-score space (a unit-norm v routed thyroid too softly)
    learn_v = routes and m > 1
    gamma = aux.gamma[k][cols]
    sizes = [len(cols) * m, m, m if learn_v else 0, 1 if routes else 0]
    cuts = np.cumsum(sizes)

    def unpack(x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, float]:
        W = x[:cuts[0]].reshape(len(cols), m)
        b = x[cuts[0]:cuts[1]]
        v = x[cuts[1]:cuts[2]] if learn_v else P.v[k]
        theta = float(x[cuts[2]]) if routes else 0.0
        return W, b, v, theta

    def fun(x: FloatArray) -> tuple[float, FloatArray]:
        W, b, v, theta = unpack(x)
        z = Xa @ W + b
        loss, dloss = loss_of(prob, z)
        sq = prob.group_sums((W ** 2).sum(axis=1), cols)
        own = prob.weight * loss + 0.5 * terms.self_h @ sq + terms.self_const
        value = 0.5 * float(terms.kappa @ sq) + 0.5 * prob.rho * float((W ** 2 / gamma).sum())
        coef = terms.kappa.copy()
        if routes:
            q = expit(z @ v - theta)
            r_hi = terms.r_hi + 0.5 * terms.h_hi @ sq
            r_lo = terms.r_lo + 0.5 * terms.h_lo @ sq
            a = 1 - q if terms.exit_scaled else np.ones(n)
            da = -1.0 if terms.exit_scaled else 0.0
            value += float((terms.p * (a * own + q * r_hi + (1 - q) * r_lo)).mean())
            ds = terms.p * (da * own + r_hi - r_lo) * q * (1 - q) / n
            coef += (terms.p * a) @ np.broadcast_to(terms.self_h, (n, len(sq))) / n
            coef += ((terms.p * q) @ terms.h_hi + (terms.p * (1 - q)) @ terms.h_lo) / n
        else:
            a, ds = np.ones(n), np.zeros(n)
            value += float((terms.p * own).mean())
            coef += terms.p.mean() * terms.self_h
        dz = (terms.p * a * prob.weight)[:, None] * dloss / n + ds[:, None] * v[None, :]
        gW = Xa.T @ dz + W * prob.column_sums(coef, cols)[:, None] + prob.rho * W / gamma
        grads = [gW.ravel(), dz.sum(axis=0)]
        if learn_v:
            grads.append(ds @ z)
        if routes:
            grads.append(np.array([-ds.sum()]))
        return value, np.concatenate(grads)

    start = [P.W[k][cols].ravel(), P.b[k]]
    if learn_v:
        start.append(P.v[k])
    if routes:
        start.append(np.array([P.theta[k]]))
    return fun, np.concatenate(start), unpack, cols


def solve_node(prob: Problem, shape: Shape, P: Params, aux: Aux, k: int, terms: NodeTerms,
               max_iter: int) -> None:
    """Update ``P``'s node ``k`` in place by L-BFGS (the block objective does not increase)."""
    fun, x0, unpack, cols = node_objective(prob, shape, P, aux, k, terms)
    result = minimize(fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter})
    x = result.x if result.fun <= fun(x0)[0] else x0
    W, b, v, theta = unpack(x)
    full = np.zeros_like(P.W[k])
    full[cols] = W
    P.W[k], P.b[k] = full, np.array(b)
    if shape.routes(k):
        P.v[k], P.theta[k] = np.array(v), theta
