"""CSTC on the paper's squared loss for two classes (trainer.methods.cstc): the node block's
gradient, the logit scale that keeps every decision, and the look-ahead initialisation finding
the perfect tree on a quadrant set with decoys where the paper's leaf-fit initialisation does
not."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.trainer.data.quadrant_decoys import VARIANTS, decoy_quadrants
from adaptedge.trainer.methods.cstc.estimator import CSTCClassifier, calibrate, train_model
from adaptedge.trainer.methods.cstc.objective import Params, Problem
from adaptedge.trainer.methods.cstc.optimise import Schedule
from adaptedge.trainer.methods.cstc.structure import full_tree
from tests.support.cstc_gradient import assert_node_gradient


@pytest.mark.parametrize("k", [0, 1, 5])
def test_squared_sign_block_gradient_matches_finite_differences(k: int) -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 4))
    y = 2.0 * rng.integers(0, 2, size=60) - 1
    prob = Problem(X, y[:, None], np.ones(60), np.array([0, 0, 1, 2]), np.array([0.5, 1.0, 1.5]),
                   0.3, 0.01, "cstc", loss="squared-sign", route_slope=10.0)
    P = Params([rng.normal(size=(4, 1)) for _ in range(7)], [rng.normal(size=1) for _ in range(7)],
               [np.full(1, 3.0) for _ in range(7)], rng.normal(size=7),
               [np.ones(3, dtype=bool) for _ in range(7)])
    shape = full_tree(3)
    assert_node_gradient(prob, shape, P, k)


def _fit(init: str, variant: str = "even") -> tuple[CSTCClassifier, float, float]:
    d = decoy_quadrants(variant, n=3000, seed=1)
    costs = [s.energy_mj for s in d.sensors]
    model = CSTCClassifier(costs=costs, lam=0.1, init=init).fit(
        d.X_train, d.y_train, X_val=d.X_val, y_val=d.y_val)
    node = model.model_.answering_node(d.X_test)
    paid = [sum(costs[g] for j in model.model_.shape.path(int(k)) for g in model.model_.groups[j])
            for k in node]
    return model, float((model.predict(d.X_test) == d.y_test).mean()), float(np.mean(paid))


@pytest.mark.slow
def test_lookahead_finds_the_perfect_tree_the_leaf_fit_init_misses() -> None:
    perfect = VARIANTS["even"].perfect_cost()
    _, accuracy, cost = _fit("lookahead")
    assert accuracy >= 0.98 and cost <= 1.15 * perfect
    _, paper_accuracy, paper_cost = _fit("paper")
    assert paper_accuracy < 0.98 or paper_cost > 1.15 * perfect


def test_logit_scale_keeps_every_decision() -> None:
    """``calibrate`` rescales each node's prediction and threshold: routes and classes stay."""
    from dataclasses import replace

    d = decoy_quadrants("skewed", n=1500, seed=2)
    model = train_model(d.X_train, d.y_train, 2, full_tree(2),
                        groups=[(i,) for i in range(d.X_train.shape[1])],
                        costs=[s.energy_mj for s in d.sensors], lam=0.3, rho=1e-3,
                        variant="cstc", schedule=Schedule(sweeps=1), val=(d.X_val, d.y_val),
                        init="paper")
    assert all(float(v[0]) == 1.0 for v in model.v)
    steep = replace(model, v=tuple(np.full(1, 4.0) for _ in model.v), theta=4 * model.theta)
    again = calibrate(steep, d.X_train, d.y_train)
    np.testing.assert_array_equal(again.answering_node(d.X_test),
                                  model.answering_node(d.X_test))
    for k in model.shape.alive():
        np.testing.assert_array_equal(again.logits(k, d.X_test) > 0,
                                      model.logits(k, d.X_test) > 0)
    proba = CSTCClassifier(costs=[s.energy_mj for s in d.sensors], lam=0.3, depth=2, sweeps=1,
                           init="paper").fit(d.X_train, d.y_train, X_val=d.X_val,
                                             y_val=d.y_val).predict_proba(d.X_test)
    assert np.allclose(proba.sum(axis=1), 1.0) and ((proba > 0) & (proba < 1)).all()
