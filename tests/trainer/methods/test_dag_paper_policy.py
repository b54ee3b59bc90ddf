"""``--param policy=paper``: the DAG paper's filter tree of logistic regressions on polynomial
features (``trainer.methods.dag.filter_tree``), its scores, its parameters and ONNX parity."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.export.bundle import evaluate_exports
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.methods.dag.filter_tree import FilterTreePolicy, monomials
from adaptedge.trainer.methods.dag.method import export_sweep, settings_from
from adaptedge.trainer.methods.dag.nodes import dag_walk
from adaptedge.trainer.methods.dag.problem import problem_from
from adaptedge.trainer.methods.dag.sweep import DagSettings, sweep_dag
from adaptedge.trainer.methods.params import ParamError
from adaptedge.trainer.methods.registry import MethodOptions
from tests.support.dag_parity import assert_same_walk

pytestmark = pytest.mark.usefixtures("one_native_thread")


def _ring(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Three actions: 0 is cheapest inside the unit circle, 1 outside with x0 > 0, 2 else."""
    rng = np.random.default_rng(seed)
    F = rng.uniform(-2, 2, size=(n, 2))
    best = np.where(np.hypot(F[:, 0], F[:, 1]) < 1.2, 0, np.where(F[:, 0] > 0, 1, 2))
    costs = np.ones((n, 3))
    costs[np.arange(n), best] = 0.0
    return F, costs


def test_filter_tree_learns_a_quadratic_cost_boundary() -> None:
    F, costs = _ring(3000, 0)
    G, test_costs = _ring(2000, 1)
    quadratic = FilterTreePolicy.fit(F, costs, degree=2)
    linear = FilterTreePolicy.fit(F, costs, degree=1)
    best = test_costs.argmin(axis=1)
    assert np.mean(quadratic.choose(G) == best) >= 0.95
    assert np.mean(linear.choose(G) == best) < 0.85  # a circle is not a half-plane


def test_scores_are_zero_for_the_descent_and_minus_a_logit_otherwise() -> None:
    F, costs = _ring(1500, 2)
    policy = FilterTreePolicy.fit(F, costs, degree=2)
    scores = policy.scores(F)
    z = policy.logits(F)
    top = scores.max(axis=1)
    np.testing.assert_allclose(top, 0.0, atol=1e-12)
    # the descent: the root (last internal node) decides between its two subtrees
    root = z[:, -1]
    chosen = scores.argmax(axis=1)
    goes_right = policy.right[-1, chosen] == 1
    assert np.all(goes_right == (root > 0))
    # the runner-up is exactly |z| of some internal node on the chosen action's path
    runner_up = np.sort(scores, axis=1)[:, -2]
    on_path = (policy.right + policy.left)[:, chosen].T == 1
    gaps = np.where(on_path, np.abs(z), np.inf).min(axis=1)
    np.testing.assert_allclose(-runner_up, gaps, rtol=1e-9)


def test_monomials_of_degree_two_hold_every_product() -> None:
    F = np.array([[2.0, 3.0, 1.0]])
    np.testing.assert_array_equal(monomials(F, 2), [[4, 6, 2, 6, 9, 3, 2, 3, 1]])


def test_policy_parameters() -> None:
    paper = settings_from(MethodOptions(extra={"policy": "paper", "policy_degree": "1"}))
    assert paper.reductions == ("paper",) and paper.policy_degree == 1
    assert "paper" not in settings_from(MethodOptions()).reductions
    with pytest.raises(ParamError, match="policy must be one of linear, paper"):
        settings_from(MethodOptions(extra={"policy": "tree"}))


@pytest.mark.slow
def test_paper_policy_exports_with_parity_on_the_whole_test_split() -> None:
    """Bundle (onnxruntime, float32) vs the float64 walk, on every row farther than 1e-6
    from a tie (the DAG parity rule, ``support.dag_parity``)."""
    dataset = load_dataset("wall-robot")
    hpc = fit_hpc(dataset, kind=make_pipeline(StandardScaler(), LogisticRegression(
        max_iter=2000)), cache=False)
    settings = DagSettings.quick(classifier="lr", reductions=("paper",), lambdas=(0.01, 0.3),
                                 escalation_prices=(1.0,))
    sweep = sweep_dag(problem_from(dataset, hpc), settings)
    assert sweep.reduction == "paper"
    exports = export_sweep(sweep)
    assert all(e.params["reduction"] == "paper" for e in exports)
    results = evaluate_exports(dataset, hpc, exports, "test")
    names = [s.name for s in dataset.sensors]
    for point, export, onnx_result in zip(sweep.points, exports, results, strict=True):
        assert_same_walk(onnx_result, dag_walk(point, sweep.bank, "test"), names, export.name)
    assert any(r.escalated.any() for r in results)
    assert any(len(e.nodes) > 3 for e in exports)
