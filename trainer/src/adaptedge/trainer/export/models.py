"""Whole models: a core (trees or linear) followed by a head, over input ``x``.

``node_model`` is a policy node's model: its core computes ``T = n_logits (+1 gate)`` raw
scores; columns ``0..n_logits-1`` are the LPC's logits (one for binary, one per class
otherwise) and, for gated nodes, the last column is the gate score g (escalate when g > 0, the
threshold already folded into g's base value); ``heads`` turn them into ``probabilities`` and
(``gate``/``confidence``) ``action_scores`` [N, 2] for (stop, escalate). A ``stop`` node has
no ``action_scores``. Tree leaves and base values of the trainer's trees are multiples of
``trainer.methods.cart.LEAF_QUANTUM``, so onnxruntime's float32 sums equal Python's float64 sums
exactly: gate routing is bit-identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt
import onnx

from adaptedge.protocol.onnx_contract import MODEL_INPUT, PROBA_OUTPUT
from adaptedge.trainer.export import heads
from adaptedge.trainer.export.graph import REGRESSOR_OUTPUT, GraphBuilder
from adaptedge.trainer.export.linear import linear
from adaptedge.trainer.export.trees import SplitMode, TreeArrays, tree_ensemble

Head = Literal["gate", "gate_basis", "confidence", "stop"]


def node_model(core_nodes: Sequence[onnx.NodeProto], core_inits: Sequence[onnx.TensorProto],
               n_inputs: int, n_classes: int, head: Head, confidence_threshold: float = 0.5,
               margin_weight: float = 0.0) -> bytes:
    """Wrap a core (``trees.tree_core`` or ``linear.linear_core``) into the node contract."""
    n_logits = 1 if n_classes == 2 else n_classes
    b = GraphBuilder(n_inputs)
    b.nodes += core_nodes
    b.initializers += core_inits
    b.const("logit_start", [0], np.int64)
    b.const("logit_end", [n_logits], np.int64)
    b.const("axis1", [1], np.int64)
    b.add("Slice", ["core", "logit_start", "logit_end", "axis1"], ["z"])
    heads.probabilities(b, "z", n_classes)
    if head in ("gate", "gate_basis"):
        b.const("gate_end", [n_logits + 1], np.int64)
        b.add("Slice", ["core", "logit_end", "gate_end", "axis1"], ["g_raw"])
        if head == "gate":
            heads.gate(b, "g_raw", "z", n_classes, margin_weight)
        else:
            heads.gate_basis(b, "g_raw", "z", n_classes)
    elif head == "confidence":
        heads.confidence(b, "z", n_classes, confidence_threshold)
    elif head != "stop":
        raise ValueError(f"unknown head {head!r} (gate, gate_basis, confidence, stop)")
    return b.to_bytes()


def ranked_policy_model(classifier: onnx.ModelProto, weights: npt.ArrayLike,
                        bias: npt.ArrayLike, n_classes: int, tie_band: float) -> bytes:
    """A classifier model (``x`` -> ``probabilities``) followed by ``heads.ranked_policy``."""
    n_inputs = classifier.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    b = GraphBuilder(int(n_inputs))
    b.include(classifier)
    heads.ranked_policy(b, weights, bias, n_classes, tie_band)
    return b.to_bytes()


def filter_tree_policy_model(classifier: onnx.ModelProto, scale: npt.ArrayLike,
                             shift: npt.ArrayLike, degree: int, weights: npt.ArrayLike,
                             bias: npt.ArrayLike, right: npt.ArrayLike, left: npt.ArrayLike,
                             n_classes: int, tie_band: float) -> bytes:
    """A classifier model followed by ``heads.filter_tree_policy``."""
    n_inputs = classifier.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    b = GraphBuilder(int(n_inputs))
    b.include(classifier)
    heads.filter_tree_policy(b, scale, shift, degree, weights, bias, right, left, n_classes,
                             tie_band)
    return b.to_bytes()


def linear_node_model(weights: npt.ArrayLike, bias: npt.ArrayLike,
                      action_weights: npt.ArrayLike | None = None,
                      action_bias: npt.ArrayLike | None = None) -> bytes:
    """A node model: ``probabilities = softmax(x W + b)`` [, ``action_scores = x A + c``]."""
    b = GraphBuilder(np.shape(weights)[0])
    width = linear(b, weights, bias, output="logits")
    b.output(PROBA_OUTPUT, heads.transform(b, "logits", PROBA_OUTPUT, "softmax", width))
    if action_weights is not None and action_bias is not None:
        heads.linear_policy(b, action_weights, action_bias)
    return b.to_bytes()


def linear_to_onnx(coef: npt.ArrayLike, intercept: npt.ArrayLike, *,
                   output: str = REGRESSOR_OUTPUT, transform: heads.Transform = "none"
                   ) -> onnx.ModelProto:
    """``x @ coef + intercept`` (coef [n_inputs, n_outputs]), then ``transform`` ("none",
    "softmax" or "binary", see ``heads.transform``) into ``output``."""
    W = np.asarray(coef, dtype=np.float32)
    if W.ndim != 2:
        raise ValueError(f"coef must be 2-D [n_inputs, n_outputs], got shape {W.shape}")
    b = GraphBuilder(W.shape[0])
    width = linear(b, W, intercept, output="raw")
    b.output(output, heads.transform(b, "raw", output, transform, width))
    return b.model()


def tree_ensemble_to_onnx(trees: Sequence[TreeArrays], n_inputs: int, n_targets: int, *,
                          base_values: npt.ArrayLike | None = None,
                          mode: SplitMode = "BRANCH_LEQ", output: str = REGRESSOR_OUTPUT,
                          transform: heads.Transform = "none") -> onnx.ModelProto:
    """Sum of regression trees (+ ``base_values``), then ``transform`` into ``output``.

    Raw score [N, n_targets] = base + sum of the trees' leaf values (each tree has
    ``n_targets`` values per leaf); "none" keeps it (e.g. ``action_scores``), "softmax"
    (multi-class logits) and "binary" (one logit -> [1-p, p]) make ``probabilities``.
    Thresholds are rounded with ``trees.float32_thresholds`` for ``mode``. An ensemble of zero
    trees is allowed (constant ``base_values``).
    """
    b = GraphBuilder(n_inputs)
    for t, tree in enumerate(trees):
        per_leaf = np.asarray(tree.value).reshape(len(tree.feature), -1).shape[1]
        if per_leaf != n_targets:
            raise ValueError(f"tree {t} has {per_leaf} leaf values per node, expected "
                             f"{n_targets}")
    tree_ensemble(b, [(tree, 0) for tree in trees], n_targets, base_values, output="raw",
                  mode=mode)
    b.output(output, heads.transform(b, "raw", output, transform, n_targets))
    return b.model()


def mlp_to_onnx(layers: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]], *,
                output: str = PROBA_OUTPUT) -> onnx.ModelProto:
    """A ReLU multi-layer perceptron ending in a softmax: ``layers`` are (W [a, b], bias [b])."""
    if not layers:
        raise ValueError("an MLP needs at least one layer")
    b = GraphBuilder(np.shape(layers[0][0])[0])
    source, width = MODEL_INPUT, 0
    for k, (W, bias) in enumerate(layers):
        width = linear(b, W, bias, source=source, output=f"z{k}", name=f"l{k}_")
        source = f"z{k}"
        if k < len(layers) - 1:
            b.add("Relu", [source], [f"r{k}"])
            source = f"r{k}"
    b.output(output, heads.transform(b, source, output, "softmax", width))
    return b.model()
