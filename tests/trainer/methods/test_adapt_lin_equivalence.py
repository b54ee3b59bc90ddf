"""ADAPT-LIN's FISTA step against the straightforward formulas: the same numbers, bit for bit.

Issue #35 made the solver's step cheaper (the sensors' feature rows found once, p(class 1)
alone for a binary LPC, the group norm as ``np.linalg.norm``'s own dot product, a multi-class
step in reused buffers); the reference below is the step before that, and no bit of the
gradient or the prox may differ.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from adaptedge.trainer.methods.adapt_lin import AdaptLinClassifier, _Solver
from adaptedge.trainer.methods.gating import hpc_loss, proba, sigmoid

Floats = NDArray[np.float64]


def _reference_gradient(s: _Solver, th: Floats, q: Floats) -> Floats:
    out = s.Z @ th
    logits, gate = out[:, :s.k], out[:, s.k]
    p = proba(logits, s.n_classes)
    onehot = np.eye(s.n_classes)[s.y]
    if s.n_classes == 2:
        r_f = ((1 - q) * (p[:, 1] - onehot[:, 1]))[:, None]
    else:
        r_f = (1 - q)[:, None] * (p - onehot)
    r_g = (1 - q) * sigmoid(gate) - q * sigmoid(-gate)
    grad: Floats = s.Z.T @ np.hstack([r_f, r_g[:, None]]) / s.n
    grad[:-1] += s.est.l2 * th[:-1]
    return grad


def _reference_prox(s: _Solver, th: Floats, t: float) -> Floats:
    out = th.copy()
    for sensor in range(s.sensor_costs.size):
        rows = np.flatnonzero(s.feature_sensor == sensor)
        if rows.size == 0:
            continue
        norm = float(np.linalg.norm(out[rows]))
        shrink = max(0.0, 1.0 - t * s.group_weight[sensor] / norm) if norm > 0 else 0.0
        out[rows] *= shrink
    return out


@pytest.mark.parametrize("n_classes", [2, 3, 26])
def test_step_matches_the_reference_bit_for_bit(n_classes: int) -> None:
    rng = np.random.default_rng(n_classes)
    n, d = 300, 5
    feature_sensor = np.array([0, 0, 2, 3, 3], dtype=np.intp)  # sensor 1 has no feature
    costs = np.array([1.0, 2.0, 0.5, 3.0])
    Z = np.hstack([rng.normal(size=(n, d)), np.ones((n, 1))])
    y = rng.integers(0, n_classes, size=n).astype(np.int64)
    P = rng.dirichlet(np.ones(n_classes), size=n)
    est = AdaptLinClassifier(gamma=0.05, l2=1e-3)
    solver = _Solver(est, Z, y, n_classes, hpc_loss(P, y), feature_sensor, costs)
    solver.group_weight = est.gamma * costs
    k = solver.k
    for trial in range(20):
        # every fifth trial: logits in the hundreds (probabilities of exactly 0 and 1)
        th = rng.normal(scale=60.0 if trial % 5 == 4 else 0.5, size=(d + 1, k + 1))
        if trial % 4 == 0:
            th[:2] = 0.0  # a zero group: shrink 0, no division
        q = rng.uniform(size=n)
        grad = solver.gradient(th, q)
        assert np.array_equal(grad, _reference_gradient(solver, th, q))
        step = th - solver.step * grad
        assert np.array_equal(solver.prox(step, solver.step),
                              _reference_prox(solver, step, solver.step))
