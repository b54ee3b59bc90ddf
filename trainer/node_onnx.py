"""One ONNX graph per policy node: a logits core (tree ensemble or linear) and a decision head.

The core computes ``T = n_logits (+1 gate)`` raw scores from ``x`` [N, n_inputs]:
columns ``0..n_logits-1`` are the LPC's logits (one for binary, one per class otherwise) and,
for gated nodes, the last column is the gate score g (escalate when g > 0, the threshold
already folded into g's base value). The head turns them into the model contract of
``protocol.manifest``: ``probabilities`` [N, n_classes] and, for nodes with two actions,
``action_scores`` [N, 2] for (stop, escalate) whose first argmax is the Python decision:

- ``gate``: ``[-g, g]``, a tie (g == 0) stops, as ``g > 0`` escalates in Python; optionally
  ``g = g_raw − w · margin`` with the LPC's logit margin (``|z|`` binary, top-1 minus top-2
  logit otherwise) and ``w`` a power of two, so it stays exact;
- ``confidence``: stop when the LPC is confident. Binary: ``[|z| - t, t - |z|]`` on the exact
  logit (``max prob >= thr`` ⇔ ``|z| >= logit(thr)``); multi-class: ``[m - thr, thr - m]`` with
  ``m`` the max softmax probability;
- ``stop``: no ``action_scores`` (a single action).

Tree leaves and base values are multiples of ``trainer.cart.LEAF_QUANTUM``, so the float32
sums onnxruntime computes equal the float64 sums in Python exactly: gate routing is
bit-identical. Graphs pin IR 8, opset 17 and ai.onnx.ml 3 (onnxruntime >= 1.17 accepts them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

from adaptedge.protocol.manifest import ACTION_OUTPUT, MODEL_INPUT, PROBA_OUTPUT
from adaptedge.trainer.cart import Tree

IR_VERSION = 8
OPSET = 17
ML_OPSET = 3
Head = Literal["gate", "confidence", "stop"]


def tree_core(
    trees: Sequence[tuple[Tree, int]],
    base_values: NDArray[np.float64],
    feature_position: dict[int, int],
) -> list[onnx.NodeProto]:
    """A TreeEnsembleRegressor writing ``core`` [N, len(base_values)].

    ``trees`` are (tree, first target column); a tree with k outputs writes columns
    first..first+k-1. ``feature_position`` maps dataset columns to positions in ``x``.
    """
    attrs: dict[str, list[Any]] = {
        k: []
        for k in (
            "nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
            "nodes_truenodeids", "nodes_falsenodeids", "target_treeids", "target_nodeids",
            "target_ids", "target_weights",
        )
    }
    listed = list(trees)
    if not listed:  # the operator needs one tree; a zero leaf changes nothing
        listed = [(Tree(np.array([-1]), np.zeros(1, np.float32), np.array([-1]), np.array([-1]),
                        np.zeros((1, 1))), 0)]
    for tree_id, (tree, first) in enumerate(listed):
        for node in range(tree.feature.size):
            leaf = tree.feature[node] < 0
            attrs["nodes_treeids"].append(tree_id)
            attrs["nodes_nodeids"].append(node)
            attrs["nodes_featureids"].append(
                0 if leaf else feature_position[int(tree.feature[node])]
            )
            attrs["nodes_values"].append(float(tree.threshold[node]))
            attrs["nodes_modes"].append("LEAF" if leaf else "BRANCH_LEQ")
            attrs["nodes_truenodeids"].append(0 if leaf else int(tree.left[node]))
            attrs["nodes_falsenodeids"].append(0 if leaf else int(tree.right[node]))
            if leaf:
                for k in range(tree.value.shape[1]):
                    attrs["target_treeids"].append(tree_id)
                    attrs["target_nodeids"].append(node)
                    attrs["target_ids"].append(first + k)
                    attrs["target_weights"].append(float(tree.value[node, k]))
    kwargs: dict[str, Any] = dict(
        n_targets=len(base_values), base_values=[float(v) for v in base_values],
        aggregate_function="SUM", post_transform="NONE", **attrs,
    )
    node = helper.make_node("TreeEnsembleRegressor", [MODEL_INPUT], ["core"],
                            domain="ai.onnx.ml", **kwargs)
    return [node]


def linear_core(
    weights: NDArray[np.float64], bias: NDArray[np.float64]
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """``core = x @ weights + bias`` with weights [n_inputs, T]."""
    inits = [
        numpy_helper.from_array(np.asarray(weights, np.float32), "W"),
        numpy_helper.from_array(np.asarray(bias, np.float32), "b"),
    ]
    nodes = [
        helper.make_node("MatMul", [MODEL_INPUT, "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["core"]),
    ]
    return nodes, inits


def _const(name: str, values: Sequence[float] | Sequence[int], dtype: type) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def node_model(
    core_nodes: list[onnx.NodeProto],
    core_inits: list[onnx.TensorProto],
    n_inputs: int,
    n_classes: int,
    head: Head,
    confidence_threshold: float = 0.5,
    margin_weight: float = 0.0,
) -> bytes:
    """Wrap a core into the node contract; see the module docstring for the heads."""
    n_logits = 1 if n_classes == 2 else n_classes
    nodes = list(core_nodes)
    inits = list(core_inits)
    inits += [
        _const("logit_start", [0], np.int64), _const("logit_end", [n_logits], np.int64),
        _const("axis1", [1], np.int64),
    ]
    if n_classes == 2:
        inits.append(_const("one", [1.0], np.float32))
    if head == "gate":
        inits.append(_const("gate_end", [n_logits + 1], np.int64))
    nodes.append(helper.make_node("Slice", ["core", "logit_start", "logit_end", "axis1"], ["z"]))
    if n_classes == 2:
        nodes += [
            helper.make_node("Sigmoid", ["z"], ["p1"]),
            helper.make_node("Sub", ["one", "p1"], ["p0"]),
            helper.make_node("Concat", ["p0", "p1"], [PROBA_OUTPUT], axis=1),
        ]
    else:
        nodes.append(helper.make_node("Softmax", ["z"], [PROBA_OUTPUT], axis=1))
    outputs = [helper.make_tensor_value_info(PROBA_OUTPUT, TensorProto.FLOAT, [None, n_classes])]
    if head == "gate":
        nodes.append(helper.make_node("Slice", ["core", "logit_end", "gate_end", "axis1"],
                                      ["g_raw"]))
        if margin_weight:
            inits.append(_const("w_margin", [margin_weight], np.float32))
            if n_classes == 2:
                nodes.append(helper.make_node("Abs", ["z"], ["margin"]))
            else:
                inits += [_const("two", [2], np.int64), _const("zero", [0], np.int64),
                          _const("two_end", [2], np.int64)]
                nodes += [
                    helper.make_node("TopK", ["z", "two"], ["top2", "top2_idx"], axis=1),
                    helper.make_node("Slice", ["top2", "zero", "axis1", "axis1"], ["top1"]),
                    helper.make_node("Slice", ["top2", "axis1", "two_end", "axis1"], ["second"]),
                    helper.make_node("Sub", ["top1", "second"], ["margin"]),
                ]
            nodes += [
                helper.make_node("Mul", ["margin", "w_margin"], ["w_m"]),
                helper.make_node("Sub", ["g_raw", "w_m"], ["g"]),
            ]
        else:
            nodes.append(helper.make_node("Identity", ["g_raw"], ["g"]))
        nodes += [
            helper.make_node("Neg", ["g"], ["neg_g"]),
            helper.make_node("Concat", ["neg_g", "g"], [ACTION_OUTPUT], axis=1),
        ]
    elif head == "confidence":
        if n_classes == 2:
            inits.append(_const("t", [confidence_threshold], np.float32))
            nodes += [
                helper.make_node("Abs", ["z"], ["abs_z"]),
                helper.make_node("Sub", ["abs_z", "t"], ["s"]),
            ]
        else:
            inits.append(_const("t", [confidence_threshold], np.float32))
            nodes += [
                helper.make_node("ReduceMax", [PROBA_OUTPUT], ["m"], axes=[1], keepdims=1),
                helper.make_node("Sub", ["m", "t"], ["s"]),
            ]
        nodes += [
            helper.make_node("Neg", ["s"], ["neg_s"]),
            helper.make_node("Concat", ["s", "neg_s"], [ACTION_OUTPUT], axis=1),
        ]
    if head != "stop":
        outputs.append(helper.make_tensor_value_info(ACTION_OUTPUT, TensorProto.FLOAT, [None, 2]))
    graph = helper.make_graph(
        nodes, "adaptedge_node",
        [helper.make_tensor_value_info(MODEL_INPUT, TensorProto.FLOAT, [None, n_inputs])],
        outputs, initializer=inits,
    )
    model = helper.make_model(
        graph, ir_version=IR_VERSION,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("ai.onnx.ml", ML_OPSET)],
        producer_name="adaptedge",
    )
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data


def run_node(model: bytes, X: NDArray[np.floating]) -> dict[str, NDArray[np.float32]]:
    """Run a node model with onnxruntime on float32 ``X`` (tests and evaluation)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    values = session.run(names, {MODEL_INPUT: np.ascontiguousarray(X, dtype=np.float32)})
    return {name: np.asarray(v) for name, v in zip(names, values, strict=True)}
