"""The masked classifier bank (one model for every sensor set) and the per-node choice.

Small synthetic problems (``tests.test_dag.synthetic``), plus ONNX parity on wall-robot for a
sweep whose every node classifier is cut from the masked model.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.data.datasets import Dataset
from adaptedge.trainer.export.bundle import evaluate_exports
from adaptedge.trainer.export.run import run_onnx
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.methods.dag.bank import ClassifierBank
from adaptedge.trainer.methods.dag.export import OnnxCache
from adaptedge.trainer.methods.dag.masked import (
    ChoiceBank,
    MaskedBank,
    hide,
    log_loss,
    masked_training_set,
)
from adaptedge.trainer.methods.dag.method import export_sweep, settings_from
from adaptedge.trainer.methods.dag.nodes import dag_walk as walk
from adaptedge.trainer.methods.dag.problem import DagProblem, make_problem, problem_from
from adaptedge.trainer.methods.dag.sweep import DagSettings, choose_bank, sweep_dag
from adaptedge.trainer.methods.registry import MethodOptions
from tests.support.dag_parity import assert_same_walk
from tests.trainer.methods.test_dag import synthetic

pytestmark = pytest.mark.usefixtures("one_native_thread")

SETS = [(0,), (3,), (0, 3), (1, 2), (0, 1, 2, 3)]


@pytest.fixture(scope="module")
def masked() -> MaskedBank:
    return MaskedBank(synthetic(0), max_iter=25, n_folds=2, replicas=3,
                      mask_sets=[(0,), (0, 3)])


def _keep(problem: DagProblem, sensors: tuple[int, ...]) -> Any:
    keep = np.zeros(problem.n_sensors, dtype=bool)
    keep[list(sensors)] = True
    return keep


def test_masked_training_set_hides_whole_sensors() -> None:
    problem = synthetic(1)
    X, y = problem.splits["train"].X[:50], problem.splits["train"].y[:50]
    Xm, ym = masked_training_set(problem, X, y, replicas=4, rng=np.random.default_rng(0))
    assert Xm.shape == (200, 8) and np.array_equal(ym, np.tile(y, 4))
    assert not np.isnan(Xm[:50]).any()  # the first copy keeps every sensor
    hidden = np.isnan(Xm[50:]).reshape(150, 4, 2)
    assert np.all(hidden[:, :, 0] == hidden[:, :, 1])  # a sensor's columns go together
    assert not hidden.all(axis=(1, 2)).any()  # at least one sensor kept per row
    assert hidden.any()
    visible = ~np.isnan(Xm[50:])
    assert np.array_equal(Xm[50:][visible], np.tile(X, (3, 1))[visible])


def test_specialised_node_model_is_the_masked_model_with_nan(masked: MaskedBank) -> None:
    problem = masked.problem
    X = problem.splits["val"].X
    for sensors in SETS:
        entry = masked.get(sensors)
        assert entry.model.n_features_in_ == len(entry.columns)
        mine = entry.model.predict_proba(X[:, list(entry.columns)])
        full = masked.model.predict_proba(hide(problem, X, _keep(problem, sensors)))
        np.testing.assert_array_equal(mine, full)
        for iteration in entry.model._predictors:
            for predictor in iteration:
                inner = ~predictor.nodes["is_leaf"].astype(bool)
                assert np.all(predictor.nodes["feature_idx"][inner] < len(entry.columns))
    for sensors in SETS:
        assert masked.proba(sensors, "train").shape == (len(problem.splits["train"].y), 3)
    assert masked.fits == 1 + masked.n_folds  # once per bank, not per node


def test_hiding_sensors_changes_predictions(masked: MaskedBank) -> None:
    problem = masked.problem
    y = problem.splits["val"].y
    probas = {s: masked.proba(s, "val") for s in SETS}
    for a in SETS:
        for b in SETS:
            if a != b:
                assert not np.allclose(probas[a], probas[b]), (a, b)
    accuracy = {s: float((p.argmax(axis=1) == y).mean()) for s, p in probas.items()}
    # sensor 0 separates class 1, sensor 3 class 2: together they beat either alone
    assert accuracy[(0, 3)] > max(accuracy[(0,)], accuracy[(3,)]) + 0.1
    assert accuracy[(1, 2)] < accuracy[(0, 3)] - 0.1


def test_out_of_fold_probabilities_never_saw_their_rows(masked: MaskedBank) -> None:
    problem = masked.problem
    train = problem.splits["train"]
    held0 = masked.fold_models[0][1]
    assert not set(masked.fold_models[0][0]) & set(held0)
    # relabel fold 0's held-out rows: their out-of-fold answers must not move
    y = train.y.copy()
    y[held0] = (y[held0] + 1) % problem.n_classes
    relabelled = replace(problem, splits={**problem.splits, "train": replace(train, y=y)})
    other = MaskedBank(relabelled, max_iter=masked.max_iter, n_folds=masked.n_folds,
                       replicas=masked.replicas, mask_sets=masked.mask_sets)
    before, after = masked.proba((0, 3), "train"), other.proba((0, 3), "train")
    np.testing.assert_array_equal(before[held0], after[held0])
    rest = np.setdiff1d(np.arange(len(y)), held0)
    assert not np.allclose(before[rest], after[rest])


def test_out_of_fold_accuracy_is_chance_on_random_labels() -> None:
    rng = np.random.default_rng(0)
    n = 400
    sensors = [SensorSpec(f"s{i}", (i,)) for i in range(3)]
    data = {name: (rng.normal(size=(n, 3)), rng.integers(0, 2, size=n), np.full((n, 2), 0.5))
            for name in ("train", "val", "test")}
    problem = make_problem(sensors=sensors, weights=CostWeights(), link=LinkSpec(),
                           n_classes=2, data=data)
    bank = MaskedBank(problem, max_iter=60, n_folds=2, replicas=2)
    y = problem.splits["train"].y
    in_sample = (bank.model.predict_proba(problem.splits["train"].X).argmax(axis=1) == y).mean()
    oof = (bank.proba((0, 1, 2), "train").argmax(axis=1) == y).mean()
    assert in_sample > 0.75  # the refitted model memorises ...
    assert abs(oof - 0.5) < 0.08  # ... the out-of-fold answers cannot


def test_per_node_choice_keeps_the_lower_validation_log_loss() -> None:
    """Sensor 0 carries a non-linear signal (class 1 at +-2.5: the masked trees beat per-subset
    logistic regression); a masked model that never saw a hidden sensor is poor without
    sensor 0, so the per-subset model wins at the set (3,)."""
    problem = synthetic(2)
    rng = np.random.default_rng(0)
    for split in problem.splits.values():
        split.X[:, 0] *= rng.choice([-1.0, 1.0], size=len(split.X))
    per_subset = ClassifierBank(problem, kind="lr", n_folds=2)
    never_masked = MaskedBank(problem, max_iter=25, n_folds=2, replicas=1)
    bank = ChoiceBank(per_subset, never_masked)
    y = problem.splits["val"].y
    for sensors in [(0,), (3,), (0, 3), ()]:
        losses = {name: log_loss(b.proba(sensors, "val"), y) for name, b in bank.banks.items()}
        best = min(losses, key=lambda k: (losses[k], k != "per-subset"))
        assert bank.choice(sensors) == best, (sensors, losses)
        chosen = bank.banks[best]
        np.testing.assert_array_equal(bank.proba(sensors, "train"), chosen.proba(sensors, "train"))
        assert bank.get(sensors) is chosen.get(sensors)
    assert bank.choice((3,)) == "per-subset" and bank.choice(()) == "per-subset"
    assert bank.choice((0, 3)) == "masked"
    counts = bank.counts()
    assert counts["masked"] >= 1 and counts["per-subset"] >= 2
    assert bank.summary()["nodes"] == counts


def test_classifier_settings() -> None:
    problem = synthetic(0)
    quick = DagSettings.quick(max_iter=5, masked_trees=5)
    assert isinstance(choose_bank(problem, quick), ChoiceBank)  # "auto" includes masked
    only_masked = choose_bank(problem, replace(quick, classifier="masked", masked_trees=300))
    assert isinstance(only_masked, MaskedBank)
    assert only_masked.max_iter == 100  # 3 classes grow 3 trees a round
    per_subset = choose_bank(problem, replace(quick, classifier="per-subset"))
    assert type(per_subset) is ClassifierBank and set(per_subset.kind_scores) == {
        "hgb", "hgb-wide", "lr"}
    with pytest.raises(ValueError, match="unknown classifier"):
        choose_bank(problem, replace(quick, classifier="forest"))  # type: ignore[arg-type]
    options = MethodOptions(quick=True, extra={"classifier": "masked", "masked_trees": "7"})
    assert settings_from(options).masked_trees == 7
    with pytest.raises(ValueError, match="classifier must be one of"):
        settings_from(MethodOptions(extra={"classifier": "forest"}))


def synthetic_dataset(seed: int, n: int = 500) -> Dataset:
    """``synthetic``'s data as a ``Dataset`` (for the bundle path), 4 sensors of 2 features."""
    problem = synthetic(seed, n)
    split = {name: (problem.splits[name].X, problem.splits[name].y)
             for name in ("train", "val", "test")}
    return Dataset("synthetic", *split["train"], *split["val"], *split["test"],
                   classes=("a", "b", "c"), feature_names=tuple(f"f{i}" for i in range(8)),
                   sensors=problem.sensors, cost_weights=CostWeights())


@pytest.mark.slow
def test_export_parity_for_masked_nodes() -> None:
    """Same actions and answers as the Python walk on the whole test split, probabilities
    within 1e-5, for node classifiers cut from the masked model."""
    dataset = synthetic_dataset(3)
    hpc = fit_hpc(dataset, kind=make_pipeline(StandardScaler(), LogisticRegression()),
                  cache=False)
    settings = DagSettings.quick(classifier="masked", lambdas=(0.003, 0.03, 0.3),
                                 escalation_prices=(1.0,), masked_trees=30)
    sweep = sweep_dag(problem_from(dataset, hpc), settings)
    assert isinstance(sweep.bank, MaskedBank) and sweep.classifier["kind"] == "masked"
    exports = export_sweep(sweep)
    results = evaluate_exports(dataset, hpc, exports, "test")
    names = [s.name for s in dataset.sensors]
    X = sweep.problem.splits["test"].X
    cache = OnnxCache(sweep.bank)
    masked_nodes = set()
    for point, export, onnx_result in zip(sweep.points, exports, results, strict=True):
        assert point.params["classifier"] == "masked"
        mine = walk(point, sweep.bank, "test")
        assert_same_walk(onnx_result, mine, names, export.name)
        for nid, node in point.nodes.items():
            classifier = node.model.classifier
            if not classifier:
                continue
            masked_nodes.add(classifier)
            expected = sweep.bank.proba(classifier, "test")
            cols = list(sweep.problem.columns(classifier))
            np.testing.assert_allclose(run_onnx(cache.classifier(classifier), X[:, cols]),
                                       expected, atol=1e-5, err_msg=nid)
            rows = (onnx_result.final_node == nid) & ~mine.escalated
            np.testing.assert_allclose(onnx_result.probabilities[rows], expected[rows],
                                       atol=1e-5, err_msg=nid)
    assert len(masked_nodes) >= 3
    assert any(r.escalated.any() for r in results)
    assert any((~r.escalated & (r.final_node != "root")).any() for r in results)
