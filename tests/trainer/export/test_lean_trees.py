"""Tree ensembles leave out ``nodes_missing_value_tracks_true`` when it is all zeros (the
operator's default): every output on letter-binary's test split is bit-identical to the model
that spells the zeros out, and a tree that sends missing values left keeps the attribute."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from sklearn.linear_model import LogisticRegression

from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.export.models import tree_ensemble_to_onnx
from adaptedge.trainer.export.run import run_node, run_onnx
from adaptedge.trainer.export.trees import TreeArrays
from adaptedge.trainer.methods.adapt_gbrt import AdaptGbrtClassifier

MISSING = "nodes_missing_value_tracks_true"


def _trees(model: onnx.ModelProto) -> onnx.NodeProto:
    node: onnx.NodeProto = next(n for n in model.graph.node
                                if n.op_type == "TreeEnsembleRegressor")
    return node


def _spelled_out(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the all-zero attribute written, as the exporter used to write it."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    node = _trees(out)
    n = len(next(a for a in node.attribute if a.name == "nodes_modes").strings)
    node.attribute.append(helper.make_attribute(MISSING, [0] * n))
    return out


def test_an_adapt_gbrt_node_model_decides_bit_identically_without_the_zeros() -> None:
    d = load_dataset("letter-binary")
    n = d.n_features
    est = AdaptGbrtClassifier(n_rounds=2, n_trees=6, feature_sensor=list(range(n)),
                              sensor_costs=[1.0] * n, random_state=0,
                              hpc=LogisticRegression(max_iter=300))
    est.fit(d.X_train[:3000], d.y_train[:3000])
    lean = onnx.load_model_from_string(est.to_onnx())
    assert MISSING not in {a.name for a in _trees(lean).attribute}
    full = _spelled_out(lean)
    assert len(lean.SerializeToString()) < len(full.SerializeToString())
    X = d.X_test[:, list(est.node_columns())].astype(np.float32)
    X_nan = X.copy()
    X_nan[::7, 0] = np.nan  # missing values take the false branch in both
    for rows in (X, X_nan):
        got, want = run_node(lean, rows), run_node(full, rows)
        assert got.keys() == want.keys() == {"probabilities", "action_scores"}
        for name in got:
            assert np.array_equal(got[name], want[name], equal_nan=True), name


def test_a_tree_sending_missing_values_left_keeps_the_attribute() -> None:
    tree = TreeArrays(np.array([0, -1, -1]), np.array([0.5, 0.0, 0.0]), np.array([1, -1, -1]),
                      np.array([2, -1, -1]), np.array([[0.0], [-1.0], [1.0]]),
                      missing_left=np.array([True, False, False]))
    model = tree_ensemble_to_onnx([tree], 1, 1)
    assert helper.get_attribute_value(
        next(a for a in _trees(model).attribute if a.name == MISSING)) == [1, 0, 0]
    rows = np.array([[np.nan], [0.0], [1.0]], np.float32)
    assert run_onnx(model, rows, "variable")[:, 0].tolist() == [-1.0, -1.0, 1.0]
