"""Graph-Reduce's shared work: the policy inputs computed once per node, the ridge solved
from them as sklearn's Ridge does (the same floats), and the lambdas of a sweep trained on
worker processes (the same graphs for any ``n_jobs``)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from adaptedge.trainer.methods.dag.bank import ClassifierBank
from adaptedge.trainer.methods.dag.graph import LinearScores, exhaustive_lattice
from adaptedge.trainer.methods.dag.masked import ChoiceBank, MaskedBank
from adaptedge.trainer.methods.dag.reduce import (
    PolicyInputs,
    ReduceConfig,
    ReduceInputs,
    Reduction,
    _standardise,
    fit_policy,
    graph_reduce,
    ridge_fit,
)
from adaptedge.trainer.methods.dag.sweep import train_points
from tests.trainer.methods.test_dag import synthetic

pytestmark = pytest.mark.usefixtures("one_native_thread")


@pytest.mark.parametrize("seed", range(8))
def test_ridge_fit_is_sklearn_ridge_to_the_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, d, k = int(rng.integers(30, 3000)), int(rng.integers(1, 20)), int(rng.integers(2, 6))
    F = rng.normal(size=(n, d)) * rng.uniform(0.1, 10.0, d)
    F[:, 0] = 1.0 if seed % 2 else F[:, 0]  # a constant column (sd 0) on odd seeds
    costs = np.column_stack([rng.random(n) < 0.3, *(rng.random((k - 1, n)) * 0.2)])
    model = Ridge(alpha=1.0).fit(_standardise(F)[0], costs)
    coef, intercept = ridge_fit(PolicyInputs.of(F), costs)
    np.testing.assert_array_equal(coef, model.coef_)
    np.testing.assert_array_equal(intercept, model.intercept_)


@pytest.mark.parametrize("reduction", ["ridge", "lr"])
def test_fit_policy_on_shared_inputs_is_fit_policy_on_features(reduction: Reduction) -> None:
    rng = np.random.default_rng(1)
    F = rng.normal(size=(500, 4))
    inputs = PolicyInputs.of(F)
    for shift in (0.0, 0.3):  # two lambdas: the second fit reuses the inputs' Gram matrix
        costs = np.column_stack([(F[:, 0] > shift).astype(float), (F[:, 1] > 0) + 0.1,
                                 np.full(500, 0.45)])
        a, b = fit_policy(F, costs, reduction), fit_policy(inputs, costs, reduction)
        assert isinstance(a, LinearScores) and isinstance(b, LinearScores)
        np.testing.assert_array_equal(a.W, b.W)
        np.testing.assert_array_equal(a.b, b.b)


def _bank() -> ChoiceBank:
    problem = synthetic(2, n=300)
    return ChoiceBank(ClassifierBank(problem, kind="hgb", max_iter=15, n_folds=2),
                      MaskedBank(problem, max_iter=15, n_folds=2, replicas=2))


@pytest.mark.slow
def test_reduce_inputs_reduce_as_the_bank() -> None:
    bank = _bank()
    lattice = exhaustive_lattice(bank.problem.n_sensors)
    config = ReduceConfig(0.1, 1.0, "ridge")
    here, slim = graph_reduce(bank, lattice, config), graph_reduce(
        ReduceInputs.of(bank, lattice), lattice, config)
    assert here.keys() == slim.keys()
    for node, unit in here.items():
        assert unit.actions == slim[node].actions
        if isinstance(unit.policy, LinearScores):
            other = slim[node].policy
            assert isinstance(other, LinearScores)
            np.testing.assert_array_equal(unit.policy.W, other.W)
            np.testing.assert_array_equal(unit.policy.b, other.b)


@pytest.mark.slow
def test_train_points_are_the_same_graphs_for_any_n_jobs() -> None:
    bank = _bank()
    lattice = exhaustive_lattice(bank.problem.n_sensors)
    bank.prefetch(lattice.nodes, 2)
    configs = [ReduceConfig(lam, price, reduction) for reduction in ("ridge", "lr")
               for lam in (0.01, 0.2, 1.0) for price in (None, 1.0)]
    one, two = train_points(bank, lattice, configs, 1), train_points(bank, lattice, configs, 2)
    for a, b in zip(one, two, strict=True):
        assert a.params == b.params and a.validation == b.validation
        assert a.nodes.keys() == b.nodes.keys()
        for nid, node in a.nodes.items():
            assert node.actions == b.nodes[nid].actions
            pa, pb = node.model.policy, b.nodes[nid].model.policy  # type: ignore[attr-defined]
            if isinstance(pa, LinearScores):
                np.testing.assert_array_equal(pa.W, pb.W)
                np.testing.assert_array_equal(pa.b, pb.b)
