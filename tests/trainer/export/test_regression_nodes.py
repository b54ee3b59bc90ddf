"""Regression node models (contract item 4): ``value`` [N, 1] float32 and, on routing nodes,
``action_scores`` [N, 2]; walking the exported ONNX of a CSTC regressor's graph and of a
Greedy Miser stop node gives ``predict``'s values to float32 precision."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from adaptedge.protocol.onnx_contract import ACTION_OUTPUT, VALUE_OUTPUT
from adaptedge.trainer.data.synthetic_regression import regression_quadrants
from adaptedge.trainer.export.regression_nodes import (
    RegressionTreeNode,
    cstc_regression_graph,
    greedy_miser_regression_graph,
    regression_linear_model,
)
from adaptedge.trainer.methods.cstc.regressor import CSTCRegressor
from adaptedge.trainer.methods.greedy_miser_regression import GreedyMiserRegressor
from adaptedge.trainer.policy.graph import Graph

COSTS = [1.0, 1.0, 10.0, 10.0, 10.0, 10.0]


def _session(model: bytes) -> ort.InferenceSession:
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def _walk_onnx(graph: Graph, X: np.ndarray) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    """Each row's value and sensors read, following ONNX action scores (first max wins)."""
    sessions = {nid: _session(n.model.to_onnx()) for nid, n in graph.nodes.items()}
    values, read = np.zeros(len(X), dtype=np.float32), []
    for i, row in enumerate(np.asarray(X, dtype=np.float32)):
        nid = graph.root
        for _ in range(len(graph.nodes)):
            node = graph.nodes[nid]
            x = row[list(node.inputs)][None, :]
            names = [o.name for o in sessions[nid].get_outputs()]
            out = dict(zip(names, sessions[nid].run(None, {"x": x}), strict=True))
            assert out[VALUE_OUTPUT].shape == (1, 1) and out[VALUE_OUTPUT].dtype == np.float32
            action = node.actions[int(np.argmax(out[ACTION_OUTPUT][0]))] \
                if ACTION_OUTPUT in out else node.actions[0]
            if action.kind == "stop":
                values[i] = out[VALUE_OUTPUT][0, 0]
                read.append(node.sensors)
                break
            assert action.next is not None
            nid = action.next
    return values, read


def test_linear_model_outputs() -> None:
    w, X = np.array([0.5, -2.0]), np.array([[1.0, 2.0], [3.0, -1.0]], dtype=np.float32)
    out = _session(regression_linear_model(w, 1.5, (w, -0.25))).run(None, {"x": X})
    np.testing.assert_allclose(out[0][:, 0], X @ w + 1.5, rtol=1e-6)
    s = X @ w - 0.25
    np.testing.assert_allclose(out[1], np.column_stack([s, -s]), rtol=1e-6)
    empty = _session(regression_linear_model(np.zeros(0), 2.0)).run(None, {"x": X[:, :0]})
    assert [o.shape for o in empty] == [(2, 1)] and np.all(empty[0] == 2.0)


def test_cstc_graph_onnx_walk_matches_predict() -> None:
    d = regression_quadrants(n=800, seed=0)
    model = CSTCRegressor(groups=[(i,) for i in range(6)], costs=COSTS, lam=0.1).fit(
        d.X_train, d.targets("train"), d.X_val, d.targets("validation"))
    graph = cstc_regression_graph(model, d.feature_names, {"lambda": 0.1})
    X = d.X_test[:120]
    values, read = _walk_onnx(graph, X)
    np.testing.assert_allclose(values, model.predict(X), rtol=1e-5, atol=1e-4)
    assert all(len(r) == 3 for r in read)  # sign, sign, one expensive sensor
    costs = [sum(COSTS[d.feature_names.index(s)] for s in r) for r in read]
    np.testing.assert_allclose(costs, model.row_costs(X))


def test_greedy_miser_stop_node_matches_predict() -> None:
    d = regression_quadrants(n=600, seed=1)
    model = GreedyMiserRegressor(gamma=0.0, n_trees=30, learning_rate=0.3,
                                 feature_sensor=list(range(6)), sensor_costs=COSTS).fit(
        d.X_train, d.targets("train"))
    graph = greedy_miser_regression_graph(model, d.feature_names)
    X = d.X_test[:80]
    values, read = _walk_onnx(graph, X)
    np.testing.assert_allclose(values, model.predict(X), rtol=1e-5, atol=1e-4)
    node = graph.nodes["n0"]
    assert read[0] == node.sensors and node.model.proba(X).shape == (80, 0)
    assert isinstance(node.model, RegressionTreeNode)
    np.testing.assert_allclose(node.model.value(X[:, list(node.inputs)]), model.predict(X))
