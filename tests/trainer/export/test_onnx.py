"""ONNX export parity: scikit-learn conversions, hand-built trees and linear models, fusion,
and float32 threshold rounding (routing must match float64 Python on every float32 input)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import onnx
import pytest
from sklearn.ensemble import (
    ExtraTreesClassifier,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LogisticRegression, Ridge
from threadpoolctl import threadpool_limits

from adaptedge.protocol.onnx_contract import IR_VERSION, OPSET
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.export.fuse import fuse_node_model
from adaptedge.trainer.export.models import linear_to_onnx, tree_ensemble_to_onnx
from adaptedge.trainer.export.run import run_onnx
from adaptedge.trainer.export.sklearn import sklearn_to_onnx
from adaptedge.trainer.export.trees import TreeArrays, float32_thresholds


@pytest.fixture(autouse=True, scope="module")
def _one_openmp_thread() -> Iterator[None]:
    """HistGradientBoosting's OpenMP threads crawl on a busy 2-core machine."""
    with threadpool_limits(limits=1, user_api="openmp"):
        yield


@pytest.fixture(scope="module")
def satimage_small() -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64],
                              npt.NDArray[np.float32]]:
    d = load_dataset("satimage")
    return (d.X_train[::2] / 100).astype(np.float32), d.y_train[::2], \
        (d.X_test / 100).astype(np.float32)


def _check_versions(model: onnx.ModelProto) -> None:
    assert model.ir_version == IR_VERSION
    versions = {op.domain: op.version for op in model.opset_import}
    assert versions[""] <= OPSET and len(versions) == len(model.opset_import)


@pytest.mark.parametrize("make", [
    lambda: LogisticRegression(max_iter=500),
    lambda: HistGradientBoostingClassifier(max_iter=30, early_stopping=False, random_state=0),
    lambda: RandomForestClassifier(n_estimators=20, random_state=0),
    lambda: ExtraTreesClassifier(n_estimators=20, random_state=0),
])
def test_sklearn_classifier_parity(make: object, satimage_small: tuple[np.ndarray, ...]) -> None:
    X, y, X_test = satimage_small
    est = make().fit(X, y)  # type: ignore[operator]
    model = sklearn_to_onnx(est, X.shape[1])
    _check_versions(model)
    got = run_onnx(model, X_test)
    want = est.predict_proba(X_test)
    assert np.abs(got - want).max() < 1e-5
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-5  # exact ties (forest votes) may break either way
    assert np.array_equal(got.argmax(axis=1)[clear], want.argmax(axis=1)[clear])
    assert clear.mean() > 0.9


def test_fused_node_model_gives_both_outputs(satimage_small: tuple[np.ndarray, ...]) -> None:
    X, y, X_test = satimage_small
    clf = LogisticRegression(max_iter=500).fit(X[:, :9], y)
    reg = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(
        X[:, :9], np.stack([X[:, 0] > 80, X[:, 1] > 90], axis=1).astype(float))
    fused = fuse_node_model(sklearn_to_onnx(clf, 9), sklearn_to_onnx(reg, 9))
    proto = onnx.load_from_string(fused)
    _check_versions(proto)
    assert [o.name for o in proto.graph.output] == ["probabilities", "action_scores"]
    assert [i.name for i in proto.graph.input] == ["x"]
    proba = run_onnx(fused, X_test[:, :9], "probabilities")
    scores = run_onnx(fused, X_test[:, :9], "action_scores")
    assert np.abs(proba - clf.predict_proba(X_test[:, :9])).max() < 1e-5
    assert np.abs(scores - reg.predict(X_test[:, :9])).max() < 1e-5
    only = fuse_node_model(sklearn_to_onnx(clf, 9))
    assert [o.name for o in onnx.load_from_string(only).graph.output] == ["probabilities"]


def test_fuse_rejects_a_missing_output(satimage_small: tuple[np.ndarray, ...]) -> None:
    X, y, _ = satimage_small
    clf = sklearn_to_onnx(LogisticRegression(max_iter=200).fit(X[:, :3], y), 3)
    reg = sklearn_to_onnx(Ridge().fit(X[:, :3], y), 3)
    with pytest.raises(ValueError, match="no output 'scores'"):
        fuse_node_model(clf, reg, scores_output="scores")


@pytest.mark.parametrize("mode", ["BRANCH_LEQ", "BRANCH_LT"])
def test_float32_thresholds_preserve_every_decision(mode: str) -> None:
    rng = np.random.default_rng(0)
    t64 = rng.normal(size=2000) * 10.0 ** rng.integers(-3, 4, size=2000)
    t32 = float32_thresholds(t64, mode)  # type: ignore[arg-type]
    near = t64.astype(np.float32)
    # the float32 neighbours of each threshold: where rounding-to-nearest would flip
    for x in (near, np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(-np.inf))):
        x64 = x.astype(np.float64)
        if mode == "BRANCH_LEQ":
            assert np.array_equal(x64 <= t64, x <= t32)
        else:
            assert np.array_equal(x64 < t64, x < t32)
    naive_flips = np.sum((near.astype(np.float64) <= t64) != (near <= near))
    assert naive_flips > 0  # the test data does exercise thresholds that round up


def _random_tree(rng: np.random.Generator, n_inputs: int, n_targets: int, depth: int,
                 X: npt.NDArray[np.float32]) -> TreeArrays:
    feature: list[int] = []
    threshold: list[float] = []
    left: list[int] = []
    right: list[int] = []
    value: list[np.ndarray] = []

    def grow(d: int) -> int:
        i = len(feature)
        feature.append(-1)
        threshold.append(0.0)
        left.append(-1)
        right.append(-1)
        value.append(rng.normal(size=n_targets))
        if d < depth:
            f = int(rng.integers(n_inputs))
            feature[i] = f
            # thresholds exactly between float32 data values -> many near-ties after rounding
            threshold[i] = float(np.median(X[:, f])) + 1e-9
            left[i] = grow(d + 1)
            right[i] = grow(d + 1)
        return i

    grow(0)
    return TreeArrays(np.array(feature), np.array(threshold), np.array(left), np.array(right),
                      np.array(value))


def _predict_trees(trees: list[TreeArrays], X: npt.NDArray[np.float32], base: np.ndarray
                   ) -> npt.NDArray[np.float64]:
    out = np.tile(base, (len(X), 1)).astype(np.float64)
    for tree in trees:
        for r, row in enumerate(X.astype(np.float64)):
            i = 0
            while tree.feature[i] >= 0:
                i = tree.left[i] if row[tree.feature[i]] <= tree.threshold[i] else tree.right[i]
            out[r] += tree.value[i]
    return out


@pytest.mark.parametrize(("n_targets", "transform"), [(1, "none"), (1, "binary"), (3, "softmax")])
def test_tree_ensemble_builder_parity(n_targets: int, transform: str,
                                      satimage_small: tuple[np.ndarray, ...]) -> None:
    rng = np.random.default_rng(n_targets)
    _, _, X_test = satimage_small
    X = X_test[:, :6]
    trees = [_random_tree(rng, 6, n_targets, 4, X) for _ in range(8)]
    base = rng.normal(size=n_targets)
    model = tree_ensemble_to_onnx(trees, 6, n_targets, base_values=base,
                                  transform=transform,  # type: ignore[arg-type]
                                  output="probabilities" if transform != "none" else "variable")
    _check_versions(model)
    raw = _predict_trees(trees, X, base)
    got = run_onnx(model, X)
    if transform == "none":
        want = raw
    elif transform == "binary":
        p1 = 1.0 / (1.0 + np.exp(-raw[:, 0]))
        want = np.stack([1 - p1, p1], axis=1)
    else:
        e = np.exp(raw - raw.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
    assert np.abs(got - want).max() < 1e-5
    assert np.array_equal(got.argmax(axis=1), want.argmax(axis=1))


def test_tree_thresholds_that_round_up_still_route_like_python() -> None:
    x = np.float32(0.1)
    t = float(x) - 1e-12  # between float32(0.1)'s neighbour below and float32(0.1)  # python: x > t, goes right; float32(t) == x would send it left
    tree = TreeArrays(np.array([0, -1, -1]), np.array([t, 0.0, 0.0]), np.array([1, -1, -1]),
                      np.array([2, -1, -1]), np.array([[0.0], [-1.0], [1.0]]))
    got = run_onnx(tree_ensemble_to_onnx([tree], 1, 1), np.array([[x]], np.float32), "variable")
    assert got[0, 0] == 1.0


def test_linear_and_constant_models() -> None:
    rng = np.random.default_rng(1)
    W, b = rng.normal(size=(4, 3)), rng.normal(size=3)
    X = rng.normal(size=(50, 4)).astype(np.float32)
    logits = X.astype(np.float64) @ W + b
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    got = run_onnx(linear_to_onnx(W, b, output="probabilities", transform="softmax"), X)
    assert np.abs(got - e / e.sum(axis=1, keepdims=True)).max() < 1e-5
    const = linear_to_onnx(np.zeros((0, 2)), [0.3, -0.3], output="probabilities",
                           transform="softmax")
    out = run_onnx(const, np.zeros((5, 0), np.float32))
    assert out.shape == (5, 2) and out[0, 0] > out[0, 1]
    empty = tree_ensemble_to_onnx([], 3, 2, base_values=[1.0, 2.0])
    assert run_onnx(empty, np.ones((2, 3), np.float32)).tolist() == [[1.0, 2.0], [1.0, 2.0]]
