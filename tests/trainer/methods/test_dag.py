"""The policy graph (trainer.methods.dag): lattices, greedy subsets, Graph-Reduce, and ONNX parity.

Parity: the exported bundle, walked by ``trainer.policy.oracle`` on onnxruntime (float32), takes
the same decisions as the float64 walk (``trainer.policy.walk``) on every test row.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from adaptedge.protocol.bundle import open_bundle, verify
from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.export.bundle import evaluate_exports, export_bundle
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.methods.dag.bank import (
    SMALL_FIT_ROUNDS,
    ClassifierBank,
    boosting_rounds,
    can_early_stop,
)
from adaptedge.trainer.methods.dag.baselines import (
    cascade_points,
    one_node_points,
    static_points,
    static_sets,
)
from adaptedge.trainer.methods.dag.graph import (
    TIE_BAND,
    LinearScores,
    chain_lattice,
    exhaustive_lattice,
    single_node,
    track_lattice,
    track_lattice_size,
)
from adaptedge.trainer.methods.dag.method import export_sweep, settings_from
from adaptedge.trainer.methods.dag.nodes import dag_walk as walk
from adaptedge.trainer.methods.dag.nodes import evaluate
from adaptedge.trainer.methods.dag.problem import DagProblem, make_problem, problem_from
from adaptedge.trainer.methods.dag.reduce import ReduceConfig, fit_policy, train_graph
from adaptedge.trainer.methods.dag.subsets import ProxyScorer, greedy_order, greedy_subsets
from adaptedge.trainer.methods.dag.sweep import DagSettings, DagSweep, fit_tracks, sweep_dag
from adaptedge.trainer.methods.registry import MethodOptions, get_method
from adaptedge.trainer.parallel import usable_cores
from adaptedge.trainer.policy.frontier import pareto_frontier as frontier
from tests.support.dag_parity import FLOAT32_NOISE, assert_same_walk

pytestmark = pytest.mark.usefixtures("one_native_thread")


def synthetic(seed: int, n: int = 600) -> DagProblem:
    """4 sensors of 2 features; sensor 0 separates most classes, sensor 3 the rest."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=3 * n)
    X = rng.normal(size=(3 * n, 8))
    X[:, 0] += 2.5 * (y == 1)
    X[:, 6] += 2.5 * (y == 2)
    X[:, 2] += 0.5 * y
    hard = rng.random(3 * n) < 0.1
    proba = np.full((3 * n, 3), 0.05)
    proba[np.arange(3 * n), y] = 0.9          # an HPC that is right ...
    proba[hard] = np.roll(proba[hard], 1, axis=1)  # ... except on 10%
    sensors = [SensorSpec(f"s{i}", (2 * i, 2 * i + 1), energy_mj=float(i + 1)) for i in range(4)]
    parts = {name: (X[i * n:(i + 1) * n], y[i * n:(i + 1) * n], proba[i * n:(i + 1) * n])
             for i, name in enumerate(("train", "val", "test"))}
    return make_problem(sensors=sensors, weights=CostWeights(), link=LinkSpec(), n_classes=3,
                        data=parts)


# -- structure ---------------------------------------------------------------------------------
def test_exhaustive_lattice_holds_every_subset_with_single_sensor_steps() -> None:
    lattice = exhaustive_lattice(4)
    assert len(lattice.edges) == 16
    for node, targets in lattice.edges.items():
        assert len(targets) == 4 - len(node)
        for target in targets:
            assert set(node) < set(target) and len(target) == len(node) + 1
    sizes = [len(n) for n in lattice.nodes]
    assert sizes == sorted(sizes, reverse=True)


def test_track_lattice_walks_tracks_in_order() -> None:
    lattice = track_lattice([(5, 2), (7,)])
    assert lattice.edges[()] == ((5,), (7,))
    assert lattice.edges[(5,)] == ((2, 5), (5, 7))
    assert len(lattice.edges) == 3 * 2
    assert chain_lattice([(1,), (1, 3), (0, 1, 3)]).edges[(1, 3)] == ((0, 1, 3),)
    with pytest.raises(ValueError, match="grow strictly"):
        chain_lattice([(1,), (2,)])


def test_greedy_subsets_respect_size_and_budget(global_random_seed: int) -> None:
    problem = synthetic(global_random_seed)
    scorer = ProxyScorer(problem, seed=global_random_seed)
    subsets = greedy_subsets(problem, scorer, n_subsets=3, max_size=2, budget=0.5)
    assert subsets and all(1 <= len(s) <= 2 for s in subsets)
    spent = sum(problem.set_cost(s) for s in subsets) / problem.total_cost
    assert spent <= 0.5 + 1e-9
    # the two informative sensors are found; the useless expensive one is not needed first
    chosen = {s for subset in subsets for s in subset}
    assert 0 in chosen
    order = greedy_order(problem, scorer)
    assert sorted(order) == [0, 1, 2, 3]


def test_proxy_scores_on_threads_equal_one_threads() -> None:
    """``threads``: ``prefetch`` scores sets side by side; the order, the subsets and every
    scored set are those of one thread."""
    problem = synthetic(0)
    one, two = (ProxyScorer(problem, folds=3, threads=n) for n in (1, 2))
    assert two.threads == min(2, usable_cores())
    assert greedy_order(problem, one) == greedy_order(problem, two)
    assert greedy_subsets(problem, one, n_subsets=3, max_size=2) == greedy_subsets(
        problem, two, n_subsets=3, max_size=2)
    sets = [(0,), (1, 3), (0, 2, 3)]
    two.prefetch(sets)
    for key in sets:
        assert two.correct(key).tobytes() == one.correct(key).tobytes()


def test_proxy_scorer_with_folds_scores_every_training_row_once() -> None:
    problem = synthetic(0)
    n_train = len(problem.splits["train"].y)
    cv = ProxyScorer(problem, folds=3)
    assert sorted(cv.rows.tolist()) == list(range(n_train))
    assert cv.correct((0, 3)).shape == (n_train,)
    assert cv.accuracy((0, 3)) > cv.accuracy((1,)) + 0.3  # sensor 1 is noise
    holdout = ProxyScorer(problem)
    assert holdout.correct((0,)).shape == (len(holdout.rows),) and len(holdout.rows) < n_train
    with pytest.raises(ValueError, match="folds must be >= 2"):
        ProxyScorer(problem, folds=1)


def test_fit_tracks_fills_the_node_budget_in_priority_order() -> None:
    order, a, b = (0, 1, 2, 3, 4, 5), (6, 7), (8,)
    assert fit_tracks([order, a, b], 1000) == [order, a, b]
    assert track_lattice_size([order]) == 7
    # the first track keeps its length; the later ones are cut or left out
    assert fit_tracks([order, a, b], 30) == [order, a]  # 7 * 3 nodes; with (8,): 42
    assert fit_tracks([order, a, b], 20) == [order, (6,)]
    assert fit_tracks([order, (0,), (0, 1)], 64) == [order]  # prefixes add no node
    assert fit_tracks([order], 4) == [(0, 1, 2)]


def test_fit_policy_learns_the_cheaper_action() -> None:
    rng = np.random.default_rng(0)
    F = rng.normal(size=(400, 3))
    costs = np.column_stack([(F[:, 0] > 0).astype(float), (F[:, 0] <= 0).astype(float) + 0.1])
    for reduction in ("lr", "ridge"):
        policy = fit_policy(F, costs, reduction)
        chosen = policy.scores(F).argmax(axis=1)
        assert (costs[np.arange(400), chosen]).mean() < 0.2, reduction


# -- classifier bank ---------------------------------------------------------------------------
def test_boosting_rounds_spend_a_tree_budget() -> None:
    assert boosting_rounds(2, 500, 40) == 500  # one tree a round
    assert boosting_rounds(6, 500, 40) == 83   # six trees a round
    assert boosting_rounds(26, 500, 40) == 40  # the floor
    assert can_early_stop(np.repeat([0, 1], 600))
    assert not can_early_stop(np.repeat([0, 1], 400))               # too few rows
    assert not can_early_stop(np.r_[np.zeros(1500, int), np.ones(5, int)])  # a rare class


def test_early_stopping_fits_each_sensor_set_its_own_rounds() -> None:
    big = synthetic(0, n=2400)
    bank = ClassifierBank(big, max_iter=400, n_folds=2, early_stopping=True)
    weak, strong = bank.get((1,)).model, bank.get((0, 3)).model  # sensor 1 is noise
    assert weak.n_iter_ < strong.n_iter_ < 400
    fixed = ClassifierBank(big, max_iter=30, n_folds=2).get((1,)).model
    assert fixed.n_iter_ == 30 and not fixed.early_stopping
    # too few rows to hold some out: a fixed, small number of rounds
    tiny = ClassifierBank(synthetic(0, n=300), max_iter=400, n_folds=2, early_stopping=True)
    model = tiny.get((0, 3)).model
    assert model.n_iter_ == SMALL_FIT_ROUNDS and not model.early_stopping
    assert tiny.proba((0, 3), "train").shape == (300, 3)


def test_decide_measures_how_close_a_choice_came_to_another() -> None:
    policy = LinearScores(np.array([[1.0, 0.0]]), np.zeros(2))  # scores (x, 0)
    F = np.array([[0.5], [-TIE_BAND + 1e-9], [-0.5]])
    choice, margin = policy.decide(F)
    assert choice.tolist() == [0, 0, 1]  # the first action within the band of the best wins
    np.testing.assert_allclose(margin, [TIE_BAND, 1e-9, TIE_BAND], rtol=1e-6)
    assert np.array_equal(policy.choose(F), choice)


# -- Graph-Reduce ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small() -> tuple[DagProblem, ClassifierBank]:
    problem = synthetic(0)
    return problem, ClassifierBank(problem, max_iter=15, n_folds=2)


@pytest.mark.slow
def test_lambda_trades_error_for_cost(small: tuple[DagProblem, ClassifierBank]) -> None:
    problem, bank = small
    lattice = exhaustive_lattice(problem.n_sensors)
    cheap = evaluate(train_graph(bank, lattice, ReduceConfig(1000.0, None, "ridge")), bank, "val")
    assert cheap.cost == 0.0  # reading anything costs more than any error: stop at the root
    rich = evaluate(train_graph(bank, lattice, ReduceConfig(0.1, None, "ridge")), bank, "val")
    assert rich.accuracy > cheap.accuracy + 0.3
    everything = evaluate(static_points(bank, [problem.all_sensors])[0], bank, "val")
    assert rich.cost < 0.7 * everything.cost
    assert rich.accuracy >= everything.accuracy - 0.03


@pytest.mark.slow
def test_escalation_is_taken_when_the_hpc_is_worth_it(
        small: tuple[DagProblem, ClassifierBank]) -> None:
    problem, bank = small
    lattice = exhaustive_lattice(problem.n_sensors)
    graph = train_graph(bank, lattice, ReduceConfig(0.0, 1.0, "ridge"))
    result = walk(graph, bank, "val")
    # with free sensors every decision could read everything; the HPC's 90% is beaten
    # locally on the easy classes, so escalation is used on some rows but not all
    assert 0.0 < result.escalated.mean() < 1.0
    assert np.all(result.read[result.escalated].all(axis=1))
    assert result.cost[result.escalated].min() >= problem.total_cost + problem.link_cost - 1e-9
    off = train_graph(bank, lattice, ReduceConfig(0.0, None, "ridge"))
    assert not walk(off, bank, "val").escalated.any()


@pytest.mark.slow
def test_parity_check_excuses_only_decisions_within_float32_noise_of_a_tie(
        small: tuple[DagProblem, ClassifierBank]) -> None:
    problem, bank = small
    graph = train_graph(bank, exhaustive_lattice(problem.n_sensors),
                        ReduceConfig(0.1, 1.0, "ridge"))
    mine = walk(graph, bank, "test")
    names = [s.name for s in problem.sensors]

    def device(flip: int) -> SimpleNamespace:
        labels = mine.answer.copy()
        labels[flip] = (labels[flip] + 1) % problem.n_classes
        return SimpleNamespace(escalated=mine.escalated, labels=labels,
                               sensors_read=mine.read, sensor_names=tuple(names),
                               cost=mine.cost)

    local = np.flatnonzero(~mine.escalated)
    clear = local[np.argmax(mine.margin[local])]
    assert mine.margin[clear] > FLOAT32_NOISE
    with pytest.raises(AssertionError, match="1 of 600 rows decided differently"):
        assert_same_walk(device(clear), mine, names, "flipped")
    tied = mine.margin.copy()
    tied[clear] = 0.0  # the same flip on a row that sat on a tie is float32 noise
    assert_same_walk(device(clear), replace(mine, margin=tied), names, "borderline")


@pytest.mark.slow
def test_baselines_are_graphs_too(small: tuple[DagProblem, ClassifierBank]) -> None:
    problem, bank = small
    scorer = ProxyScorer(problem)
    sets = static_sets(bank, scorer)
    assert len(sets) == 16
    sky = frontier(static_points(bank, sets))
    costs = [p.validation.cost for p in sky]
    accs = [p.validation.accuracy for p in sky]
    assert costs == sorted(costs) and accs == sorted(accs)
    cascade = cascade_points(bank, greedy_order(problem, scorer), (0.01, 1.0), "ridge")
    assert all(len(p.nodes) <= problem.n_sensors + 1 for p in cascade)
    gate = one_node_points(bank, [(0, 3)], (0.0,), "ridge")[0]
    assert set(gate.nodes) == {"n0_3"}
    assert [a.kind for a in gate.nodes["n0_3"].actions] == ["stop", "escalate"]
    assert single_node((3, 0)).root == (0, 3)


# -- real dataset: method, export, parity ------------------------------------------------------
@pytest.fixture(scope="module")
def wall() -> tuple[Any, Any, DagSweep]:
    dataset = load_dataset("wall-robot")
    hpc = fit_hpc(dataset, kind=make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)), cache=False)
    sweep = sweep_dag(problem_from(dataset, hpc), DagSettings.quick(classifier="hgb"))
    return dataset, hpc, sweep


@pytest.mark.slow
def test_export_parity_on_the_whole_test_split(wall: tuple[Any, Any, DagSweep]) -> None:
    dataset, hpc, sweep = wall
    exports = export_sweep(sweep)
    assert len(exports) == len(sweep.points) == 6
    results = evaluate_exports(dataset, hpc, exports, "test")
    names = [s.name for s in dataset.sensors]
    for point, export, onnx_result in zip(sweep.points, exports, results, strict=True):
        mine = walk(point, sweep.bank, "test")
        assert_same_walk(onnx_result, mine, names, export.name)
    assert any(r.escalated.any() for r in results)
    assert any(len(e.nodes) > 3 for e in exports)


@pytest.mark.slow
def test_bundle_verifies_and_method_is_registered(tmp_path: Path,
                                                  wall: tuple[Any, Any, DagSweep]) -> None:
    dataset, hpc, sweep = wall
    manifest = export_bundle(tmp_path / "b", dataset, hpc, export_sweep(sweep)[:2])
    assert len(manifest.policies) == 2
    with open_bundle(tmp_path / "b") as root:
        assert verify(root).bundle_id == manifest.bundle_id
    train = get_method("dag")
    exports = train(dataset, hpc, MethodOptions(quick=True, extra={
        "escalation": "off", "lambdas": "0.1", "classifier": "lr"}))
    assert len(exports) == 1 and exports[0].validation.escalation_rate == 0.0
    assert exports[0].method == "dag" and exports[0].params["lambda"] == 0.1


@pytest.mark.slow
def test_static_and_cascade_methods() -> None:
    dataset = load_dataset("heart")  # small: wall-robot's 24-sensor greedy orders took 27 s
    hpc = fit_hpc(dataset, kind=make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
                  cache=False)
    fast = {"classifier": "lr"}
    static = get_method("static")(dataset, hpc, MethodOptions(quick=True, extra=fast))
    assert all(len(e.nodes) == 1 and e.nodes[e.root].actions[0].kind == "stop" for e in static)
    costs = [e.validation.cost for e in static]
    assert costs == sorted(costs) and len(static) >= 3
    cascade = get_method("cascade")(dataset, hpc, MethodOptions(quick=True, extra=fast))
    assert len(cascade) == len(DagSettings.quick().lambdas)
    assert all(e.validation.escalation_rate == 0.0 for e in cascade)
    for method, alone in (("static", static), ("cascade", cascade)):  # models side by side
        both = get_method(method)(dataset, hpc, MethodOptions(quick=True, n_jobs=2, extra=fast))
        assert [(e.name, e.validation) for e in both] == [(e.name, e.validation) for e in alone]


def test_unknown_options_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown dag options"):
        settings_from(MethodOptions(extra={"lamdas": "1"}))
    with pytest.raises(ValueError, match="escalation must be one of"):
        settings_from(MethodOptions(extra={"escalation": "maybe"}))
    assert settings_from(MethodOptions(quick=True)).lambdas == DagSettings.quick().lambdas
    assert settings_from(MethodOptions(extra={"subset_trees": "80"})).subset_trees == 80
    assert settings_from(MethodOptions(extra={"max_exhaustive": "8"})).max_exhaustive == 8
    with pytest.raises(ValueError, match="subset_trees must be >= 1"):
        settings_from(MethodOptions(extra={"subset_trees": "0"}))
