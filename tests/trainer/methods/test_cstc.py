"""CSTC trees and CSCC / Cronus cascades (trainer.methods.cstc): Algorithm 1's node blocks,
the exported policy graph (route to children, stop/escalate at terminals), ONNX parity with
the float64 walk (the synthetic and the four benchmark data sets), the estimators, and the §6.1 synthetic experiment (slow)."""

from __future__ import annotations

import pickle
from functools import cache
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import tests.support.estimator_checks as checks
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.data.synthetic_quadrants import synthetic_quadrants
from adaptedge.trainer.export.bundle import evaluate_exports
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.methods.cstc.estimator import CSCCClassifier, CSTCClassifier, _targets
from adaptedge.trainer.methods.cstc.node_solve import node_objective, node_terms
from adaptedge.trainer.methods.cstc.objective import Params, Problem, forward, solve_aux
from adaptedge.trainer.methods.cstc.structure import cascade, full_tree
from adaptedge.trainer.methods.dag.problem import problem_from
from adaptedge.trainer.methods.registry import MethodOptions, get_method
from adaptedge.trainer.policy.walk import walk
from tests.support.dag_parity import assert_same_walk


@cache
def quadrants(form: str = "pairs") -> tuple[Any, Any]:
    dataset = synthetic_quadrants(n=1500, seed=0, form=form)  # type: ignore[arg-type]
    hpc = fit_hpc(dataset, kind=make_pipeline(StandardScaler(), LogisticRegression()),
                  cache=False)
    return dataset, hpc


def _random_problem(variant: str, m: int) -> tuple[Problem, Params]:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 4))
    y = rng.integers(0, 2 if m == 1 else m, size=60)
    prob = Problem(X, _targets(y, 2 if m == 1 else m), np.ones(60), np.array([0, 0, 1, 2]),
                   np.array([0.5, 1.0, 1.5]), 0.3, 0.01, variant)  # type: ignore[arg-type]
    n = 7
    P = Params([rng.normal(size=(4, m)) for _ in range(n)], [rng.normal(size=m) for _ in range(n)],
               [rng.normal(size=m) if m > 1 else np.ones(1) for _ in range(n)],
               rng.normal(size=n), [np.ones(3, dtype=bool) for _ in range(n)])
    return prob, P


@pytest.mark.parametrize(("variant", "kind", "m", "k"), [
    ("cstc", "tree", 1, 0), ("cstc", "tree", 1, 4), ("cstc", "tree", 3, 1),
    ("cscc", "cascade", 1, 1), ("cscc", "cascade", 3, 0), ("cronus", "cascade", 1, 2)])
def test_node_block_gradient_matches_finite_differences(variant: str, kind: str, m: int,
                                                        k: int) -> None:
    prob, P = _random_problem(variant, m)
    shape = full_tree(3) if kind == "tree" else cascade(4)
    st = forward(prob, shape, P)
    aux = solve_aux(prob, shape, P, st)
    fun, x0, _, _ = node_objective(prob, shape, P, aux, k, node_terms(prob, shape, P, st, aux, k))
    _, grad = fun(x0)
    step = 1e-6
    numeric = np.array([(fun(x0 + step * e)[0] - fun(x0 - step * e)[0]) / (2 * step)
                        for e in np.eye(len(x0))])
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-6)


def test_shapes_paths_and_terminals() -> None:
    tree = full_tree(3)
    assert tree.path(5) == [0, 2, 5] and tree.terminals() == [3, 4, 5, 6]
    assert tree.cut(1).alive() == [0, 1, 2, 5, 6]
    chain = cascade(3)
    assert chain.terminals() == [0, 1, 2] and chain.path(2) == [0, 1, 2]


@pytest.mark.slow
@pytest.mark.parametrize("method,extra,form", [
    ("cstc", {}, "rates"), ("cstc", {"loss": "logistic"}, "rates"), ("cstc", {}, "pairs"),
    ("cscc", {}, "rates"), ("cscc", {"variant": "cronus"}, "pairs")])
def test_export_parity_and_route_contract(method: str, extra: dict[str, str], form: str) -> None:
    """Two classes (``rates``: the logistic loss leaves CSTC unsure, so it escalates; the
    squared loss finds the perfect tree) and four (``pairs``: learned v)."""
    dataset, hpc = quadrants(form)
    graphs = get_method(method)(dataset, hpc, MethodOptions(quick=True, extra={
        "lambdas": "0.1", "sweeps": "1", **extra}))
    assert len(graphs) == 6 and {g.params["threshold"] for g in graphs} >= {"none", 0.9}
    for graph in graphs:
        for node in graph.nodes.values():
            for action in node.actions:
                if action.kind == "route":
                    assert action.next is not None
                    assert set(graph.nodes[action.next].sensors) >= set(node.sensors)
    results = evaluate_exports(dataset, hpc, graphs, "test")
    names = [s.name for s in dataset.sensors]
    table_hpc = hpc.proba_test
    table = problem_from(dataset, hpc).cost_table()
    for graph, onnx_result in zip(graphs, results, strict=True):
        mine = walk(graph, dataset.X_test, table_hpc, table)
        assert_same_walk(onnx_result, mine, names, graph.name)
    logistic = extra.get("loss") == "logistic"
    assert method != "cstc" or form != "rates" or not logistic or \
        any(r.escalated.any() for r in results)
    assert method != "cstc" or form != "rates" or logistic or \
        max(float((r.labels == dataset.y_test).mean()) for r in results) >= 0.98
    routes = [a for g in graphs for n in g.nodes.values() for a in n.actions if a.kind == "route"]
    assert method != "cstc" or form != "pairs" or routes


PARITY_TRAIN_ROWS = 3_000
"""Training rows per data set at most (a seeded random subset; validation and test untouched):
parity is a property of the exported graphs on every test row, not of how well they fit, and
the whole training split costs ~4x the CPU (CSTC on letter-binary's 12,000 rows: ~14 s)."""


@cache
def benchmark_data(name: str) -> tuple[Any, Any]:
    """A benchmark data set with a logistic HPC (uncached: parity does not need the real one;
    one BLAS thread: on gas two spinning threads take ~60 s instead of ~1 s)."""
    from dataclasses import replace

    from threadpoolctl import threadpool_limits

    dataset = load_dataset(name, seed=0)
    if len(dataset.y_train) > PARITY_TRAIN_ROWS:
        keep = np.sort(np.random.default_rng(0).choice(len(dataset.y_train), PARITY_TRAIN_ROWS,
                                                       replace=False))
        sizes = dataset.sizes and (dataset.sizes[0][keep], *dataset.sizes[1:])
        dataset = replace(dataset, X_train=dataset.X_train[keep], y_train=dataset.y_train[keep],
                          sizes=sizes)
    with threadpool_limits(limits=1, user_api="blas"):
        hpc = fit_hpc(dataset, kind=make_pipeline(StandardScaler(),
                                                  LogisticRegression(max_iter=300)), cache=False)
    return dataset, hpc


PARITY_DATA = ("letter-binary", "thyroid", "miniboone-tiny", "gas")
PARITY_METHODS = [("cstc", ()), ("cscc", ()), ("cscc", (("variant", "cronus"),))]


@cache
def exported_on(name: str, method: str, extra: tuple[tuple[str, str], ...]) -> tuple[Any, Any]:
    """The method's quick graphs on a benchmark data set at one lambda, and their exported
    bundles' decisions on the test split (onnxruntime, float32)."""
    dataset, hpc = benchmark_data(name)
    graphs = get_method(method)(dataset, hpc, MethodOptions(quick=True, progress=False, extra={
        "lambdas": "0.1", "sweeps": "1", **dict(extra)}))
    return graphs, evaluate_exports(dataset, hpc, graphs, "test")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["cstc", "cscc"])
def test_lambdas_fitted_side_by_side_give_the_same_graphs(method: str) -> None:
    """The sweep fits its lambdas on ``n_jobs`` processes: the graphs are the same for any."""
    dataset, hpc = quadrants("pairs")
    extra = {"lambdas": "0.3,0.03", "sweeps": "1"}
    one, two = (get_method(method)(dataset, hpc, MethodOptions(
        quick=True, n_jobs=n, progress=False, extra=extra)) for n in (1, 2))
    assert len(one) == 12 and [g.name for g in one] == [g.name for g in two]
    assert [g.validation for g in one] == [g.validation for g in two]
    assert [g.params for g in one] == [g.params for g in two]


@pytest.mark.slow
@pytest.mark.parametrize("name", PARITY_DATA)
@pytest.mark.parametrize("method,extra", PARITY_METHODS)
def test_export_parity_on_the_benchmark_data_sets(
        name: str, method: str, extra: tuple[tuple[str, str], ...]) -> None:
    """The exported bundle (onnxruntime, float32) and the float64 training walk agree on every
    test row farther than 1e-6 from a tie, at one lambda with every escalation threshold."""
    dataset, hpc = benchmark_data(name)
    graphs, results = exported_on(name, method, extra)
    assert len(graphs) == 6
    names = [s.name for s in dataset.sensors]
    table = problem_from(dataset, hpc).cost_table()
    for graph, onnx_result in zip(graphs, results, strict=True):
        mine = walk(graph, dataset.X_test, hpc.proba_test, table)
        assert_same_walk(onnx_result, mine, names, f"{name} {graph.name}")


@pytest.mark.slow
@pytest.mark.parametrize("method,extra", PARITY_METHODS)
def test_export_parity_covers_escalation(method: str, extra: tuple[tuple[str, str], ...]) -> None:
    """The parity above is tested on escalating decisions too: for each method some threshold
    escalates rows on some of the data sets (a variant may never escalate on one of them)."""
    escalating = [name for name in PARITY_DATA
                  if any(r.escalated.any() for r in exported_on(name, method, extra)[1])]
    assert escalating, f"{method} {dict(extra)}: no threshold escalated: parity untested"


@pytest.mark.slow
def test_estimators_clone_pickle_refit_and_not_fitted() -> None:
    dataset, _ = quadrants()
    data = checks.Data(dataset.X_train, dataset.y_train, np.zeros((len(dataset.y_train), 2)),
                       dataset.X_test)
    costs = [s.energy_mj for s in dataset.sensors]
    for factory in (lambda: CSTCClassifier(costs=costs, lam=0.1, depth=2, sweeps=1),
                    lambda: CSCCClassifier(costs=costs, lam=0.1, stages=2, sweeps=1),
                    lambda: CSCCClassifier(costs=costs, variant="cronus", stages=2, sweeps=1)):
        checks.check_clone_params(factory())
        with pytest.raises(ValueError, match="not fitted"):
            factory().predict_proba(data.X_test)
        a = factory().fit(data.X_train, data.y_train)
        b = factory().fit(data.X_train, data.y_train)
        np.testing.assert_array_equal(a.predict_proba(data.X_test), b.predict_proba(data.X_test))
        checks.check_pickle(a, data)
        assert pickle.loads(pickle.dumps(a)).node_columns() == a.node_columns()
        assert (a.predict(data.X_test) == dataset.y_test).mean() > 0.6


def test_unknown_and_bad_options_are_refused() -> None:
    dataset, hpc = quadrants()
    for extra, message in (({"lamdas": "1"}, "unknown cstc options"),
                           ({"escalation": "maybe"}, "escalation must be on or off"),
                           ({"features": "deep"}, "features must be raw or boosted"),
                           ({"depth": "0"}, "depth must be >= 1")):
        with pytest.raises(ValueError, match=message):
            get_method("cstc")(dataset, hpc, MethodOptions(quick=True, extra=extra))
    with pytest.raises(ValueError, match="variant must be cscc or cronus"):
        get_method("cscc")(dataset, hpc, MethodOptions(quick=True, extra={"variant": "x"}))


def test_synthetic_quadrants_has_a_perfect_classifier_at_cost_12() -> None:
    from adaptedge.trainer.data.synthetic_quadrants import QUADRANTS, RING, quadrant_of

    d = synthetic_quadrants(n=2000, seed=1)
    X, y = d.X_test, d.y_test
    quadrant = quadrant_of(X[:, 0], X[:, 1])
    own = X[np.arange(len(y)), 2 + quadrant]
    position = np.array([RING.index(q) for q in QUADRANTS])[quadrant]
    assert (np.where(own > 0, position, (position + 1) % 4) == y).all()
    costs = [s.energy_mj for s in d.sensors]
    assert costs == [1.0, 1.0, 10.0, 10.0, 10.0, 10.0] and d.classes == ("0", "1", "2", "3")
    cheap_only = LogisticRegression().fit(d.X_train[:, :2], d.y_train)
    assert cheap_only.score(X[:, :2], y) < 0.6
    binary = synthetic_quadrants(n=2000, seed=1, form="rates")
    quadrant = quadrant_of(binary.X_test[:, 0], binary.X_test[:, 1])
    own = binary.X_test[np.arange(len(quadrant)), 2 + quadrant]
    assert ((own > 0) == (binary.y_test == 1)).all()


@pytest.mark.slow
def test_synthetic_quadrants_tree_is_the_papers_at_cost_12() -> None:
    """§6.1 (seed 0, lambdas 0.3 and 0.1, the point chosen on validation): the tree reads one
    cheap sign per level and one expensive sensor per leaf, test accuracy >= 0.99 at cost
    <= 12.5 (``python -m benchmarks.cstc_synthetic`` runs the default sweep, seeds 0-2)."""
    from adaptedge.trainer.policy.frontier import pareto_frontier

    d = synthetic_quadrants(seed=0)
    hpc = fit_hpc(d, kind=make_pipeline(StandardScaler(), LogisticRegression()), cache=False)
    graphs = get_method("cstc")(d, hpc, MethodOptions(quick=True, extra={
        "lambdas": "0.3,0.1", "escalation": "off", "sweeps": "2"}))
    best = max(g.validation.accuracy for g in graphs)
    chosen = min((g for g in pareto_frontier(graphs) if g.validation.accuracy >= best - 0.01),
                 key=lambda g: g.validation.cost)
    test = walk(chosen, d.X_test, hpc.proba_test, problem_from(d, hpc).cost_table())
    assert test.metrics(d.y_test).accuracy >= 0.99 and test.metrics(d.y_test).cost <= 12.5
    leaves = [n for n in chosen.nodes.values() if n.actions[0].kind == "stop"]
    assert len(leaves) == 4 and all(sum(s.startswith("e_") for s in n.sensors) == 1
                                    for n in leaves)


def test_a_constant_node_on_a_tie_is_untied_and_onnx_agrees() -> None:
    """A balanced data set's prior at a large lambda (a root that reads nothing, logit ~1e-10)
    and a constant route score on a tie: the export moves both TIE_GAP past the tie on the
    float64 walk's side, so ONNX (float32) and the walk decide alike with a clear margin."""
    from dataclasses import replace

    from adaptedge.trainer.methods.cstc.export import TIE_GAP, to_graph, untie
    from adaptedge.trainer.methods.cstc.optimise import CostSensitiveModel

    assert untie(np.array([1e-10]))[0] == TIE_GAP and untie(np.array([0.0]))[0] == -TIE_GAP
    assert untie(np.array([0.2, 0.2 + 1e-9, -1.0])).argmax() == 1
    np.testing.assert_array_equal(untie(np.array([2.0, 0.0])), [2.0, 0.0])
    dataset, hpc = quadrants()
    d, m = dataset.X_train.shape[1], len(dataset.classes)
    zero = np.zeros((d, m))
    tie = np.full(m, 1e-10)
    tie[0] = 0.0
    names = tuple(s.name for s in dataset.sensors)
    columns = tuple(s.features for s in dataset.sensors)
    table = problem_from(dataset, hpc).cost_table()
    shapes = (full_tree(1), full_tree(2))
    for i, shape in enumerate(shapes):
        n = shape.n_nodes
        model = CostSensitiveModel(shape, tuple(zero for _ in range(n)),
                                   tuple(tie.copy() for _ in range(n)),
                                   tuple(np.eye(m)[0] for _ in range(n)), np.zeros(n),
                                   tuple(() for _ in range(n)))
        graph = replace(to_graph(model, names, columns), name=f"tie-{i}", method="cstc")
        mine = walk(graph, dataset.X_test, hpc.proba_test, table)
        assert (mine.margin >= TIE_GAP / 10).all()  # probabilities: ~TIE_GAP / classes
        result = evaluate_exports(dataset, hpc, [graph], "test")[0]
        assert_same_walk(result, mine, list(names), graph.name)
