"""scikit-learn models in ONNX: skl2onnx for most, the tree emitter for tree ensembles.

Every model takes ``x`` float32 [N, n_inputs]; a classifier outputs ``probabilities``
[N, C] (no ZipMap), a regressor ``variable`` [N, n_targets]. Forests, extra-trees, decision
trees and histogram gradient boosting go through ``trees.tree_ensemble`` (exact float32
thresholds, fast for big forests).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper

from adaptedge.protocol.onnx_contract import MODEL_INPUT, OPSETS, PROBA_OUTPUT
from adaptedge.trainer.export.graph import finish, float_info
from adaptedge.trainer.export.models import tree_ensemble_to_onnx
from adaptedge.trainer.export.trees import TreeArrays


def sklearn_to_onnx(estimator: Any, n_inputs: int) -> onnx.ModelProto:
    """Convert a fitted scikit-learn model (pipelines too) with input ``x`` [N, n_inputs]."""
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.base import is_classifier

    trees = sklearn_trees_to_onnx(estimator, n_inputs)
    if trees is not None:
        return trees

    options: dict[int, dict[str, Any]] = {}
    if is_classifier(estimator):
        options[id(estimator)] = {"zipmap": False}
        steps = getattr(estimator, "steps", None)
        if steps:
            options[id(steps[-1][1])] = {"zipmap": False}
    model = convert_sklearn(
        estimator, initial_types=[(MODEL_INPUT, FloatTensorType([None, n_inputs]))],
        target_opset=dict(OPSETS), options=options)
    outputs = [o.name for o in model.graph.output]
    if is_classifier(estimator) and PROBA_OUTPUT not in outputs:
        raise ValueError(f"converted classifier has outputs {outputs}, expected {PROBA_OUTPUT!r}")
    return finish(model)


def _class_columns(classes: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], int]:
    """Output column of each of ``classes_``: the label itself for labels 0..C-1."""
    labels = np.asarray(classes)
    if labels.dtype.kind in "iu" and labels.min() >= 0:
        return labels.astype(np.int64), int(labels.max()) + 1
    return np.arange(len(labels), dtype=np.int64), len(labels)


def _sk_tree(tree: Any, value: npt.NDArray[np.float64]) -> TreeArrays:
    return TreeArrays(feature=np.asarray(tree.feature, np.int64),
                      threshold=np.asarray(tree.threshold, np.float64),
                      left=np.asarray(tree.children_left, np.int64),
                      right=np.asarray(tree.children_right, np.int64), value=value)


def sklearn_trees_to_onnx(estimator: Any, n_inputs: int) -> onnx.ModelProto | None:
    """ONNX ``probabilities`` for a fitted forest / extra-trees / decision-tree / histogram
    gradient-boosting classifier, or None for any other model.

    Column k is class label k when the labels are 0..C-1 (a class absent from training gets
    probability 0). Thresholds are rounded with ``float32_thresholds`` (exact routing).
    """
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        HistGradientBoostingClassifier,
        RandomForestClassifier,
    )
    from sklearn.tree import DecisionTreeClassifier

    if isinstance(estimator, RandomForestClassifier | ExtraTreesClassifier
                  | DecisionTreeClassifier):
        return _forest(estimator, n_inputs)
    if isinstance(estimator, HistGradientBoostingClassifier):
        return _hist_boosting(estimator, n_inputs)
    return None


def _forest(estimator: Any, n_inputs: int) -> onnx.ModelProto | None:
    """The average of the members' leaf class fractions."""
    if getattr(estimator, "n_outputs_", 1) != 1:
        return None
    members = getattr(estimator, "estimators_", [estimator])
    cols, width = _class_columns(estimator.classes_)
    trees = []
    for member in members:
        raw = np.asarray(member.tree_.value[:, 0, :], np.float64)
        frac = raw / np.maximum(raw.sum(axis=1, keepdims=True), 1e-300)
        value = np.zeros((len(frac), width))
        value[:, cols] = frac / len(members)
        trees.append(_sk_tree(member.tree_, value))
    return tree_ensemble_to_onnx(trees, n_inputs, width, output=PROBA_OUTPUT)


def _hist_boosting(estimator: Any, n_inputs: int) -> onnx.ModelProto | None:
    """Baseline plus the trees' raw scores, then sigmoid (binary) or softmax."""
    if getattr(estimator, "is_categorical_", None) is not None and \
            np.any(estimator.is_categorical_):
        return None
    cols, width = _class_columns(estimator.classes_)
    k_raw = estimator._baseline_prediction.shape[1]
    trees = []
    for iteration in estimator._predictors:
        for k, predictor in enumerate(iteration):
            nd = predictor.nodes
            leaf = nd["is_leaf"].astype(bool)
            value = np.zeros((len(nd), k_raw))
            value[:, k] = np.where(leaf, nd["value"], 0.0)
            trees.append(TreeArrays(
                feature=np.where(leaf, -1, nd["feature_idx"]).astype(np.int64),
                threshold=nd["num_threshold"].astype(np.float64),
                left=nd["left"].astype(np.int64), right=nd["right"].astype(np.int64),
                value=value, missing_left=nd["missing_go_to_left"].astype(bool)))
    base = np.asarray(estimator._baseline_prediction, np.float64).ravel()
    model = tree_ensemble_to_onnx(trees, n_inputs, k_raw, base_values=base,
                                  output="binary_proba",
                                  transform="binary" if k_raw == 1 else "softmax")
    return _scatter_columns(model, "binary_proba", cols, width)


def _scatter_columns(model: onnx.ModelProto, name: str, cols: npt.NDArray[np.int64],
                     width: int) -> onnx.ModelProto:
    """Rename output ``name`` to ``probabilities``, moving column j to ``cols[j]`` of ``width``."""
    graph = model.graph
    if width == len(cols) and np.array_equal(cols, np.arange(width)):
        for node in graph.node:
            node.output[:] = [PROBA_OUTPUT if o == name else o for o in node.output]
    else:
        P = np.zeros((len(cols), width), np.float32)
        P[np.arange(len(cols)), cols] = 1.0
        graph.initializer.append(numpy_helper.from_array(P, "scatter"))
        graph.node.append(helper.make_node("MatMul", [name, "scatter"], [PROBA_OUTPUT]))
    del graph.output[:]
    graph.output.append(float_info(PROBA_OUTPUT, width))
    return finish(model)
