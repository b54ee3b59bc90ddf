"""ONNX export for the trainer: scikit-learn models, hand-built tree ensembles and linear models,
and the fusion of a node's classifier and action scorer into one graph (one runtime call).

Every model has input ``x`` float32 [N, n_inputs] and is written at ``TARGET_OPSET`` /
``ML_OPSET`` with ``IR_VERSION`` so the pinned onnxruntime (1.31: IR <= 13, opset <= 26)
loads it. Output names follow ``protocol.manifest``: ``probabilities`` for classifiers,
``variable`` for regressors, ``action_scores`` for a fused node's policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from adaptedge.protocol.manifest import ACTION_OUTPUT, MODEL_INPUT, PROBA_OUTPUT

TARGET_OPSET = 17
ML_OPSET = 3
IR_VERSION = 9
REGRESSOR_OUTPUT = "variable"
SplitMode = Literal["BRANCH_LEQ", "BRANCH_LT"]
Transform = Literal["none", "softmax", "binary"]


def _finish(model: onnx.ModelProto) -> onnx.ModelProto:
    """Pin the IR version, merge duplicate opset imports (highest per domain), check."""
    versions: dict[str, int] = {}
    for op in model.opset_import:
        versions[op.domain] = max(versions.get(op.domain, 0), op.version)
    del model.opset_import[:]
    model.opset_import.extend(helper.make_opsetid(d, v) for d, v in sorted(versions.items()))
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


# -- scikit-learn ----------------------------------------------------------------------------
def sklearn_to_onnx(estimator: Any, n_inputs: int) -> onnx.ModelProto:
    """Convert a fitted scikit-learn model (pipelines too) with input ``x`` [N, n_inputs].

    A classifier's outputs are ``label`` and ``probabilities`` [N, C] (no ZipMap); a
    regressor's is ``variable`` [N, 1] (or [N, n_targets]). Tree-ensemble classifiers go
    through ``sklearn_trees_to_onnx`` (exact float32 thresholds, fast for big forests).
    """
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
        target_opset={"": TARGET_OPSET, "ai.onnx.ml": ML_OPSET}, options=options)
    outputs = [o.name for o in model.graph.output]
    if is_classifier(estimator) and PROBA_OUTPUT not in outputs:
        raise ValueError(f"converted classifier has outputs {outputs}, expected {PROBA_OUTPUT!r}")
    return _finish(model)


# -- fusion ----------------------------------------------------------------------------------
def _prefixed(graph: onnx.GraphProto, prefix: str, keep: dict[str, str]
              ) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """The graph's nodes and initializers with every name prefixed, except those in ``keep``."""
    def rename(name: str) -> str:
        if not name:
            return name
        return keep.get(name, prefix + name)

    nodes = []
    for node in graph.node:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for a in node.attribute):
            raise ValueError(f"cannot fuse a model with sub-graphs (node {node.op_type})")
        new = onnx.NodeProto()
        new.CopyFrom(node)
        new.name = prefix + (node.name or node.op_type)
        del new.input[:]
        del new.output[:]
        new.input.extend(rename(n) for n in node.input)
        new.output.extend(rename(n) for n in node.output)
        nodes.append(new)
    inits = []
    for init in graph.initializer:
        t = onnx.TensorProto()
        t.CopyFrom(init)
        t.name = rename(init.name)
        inits.append(t)
    return nodes, inits


def _output_info(graph: onnx.GraphProto, name: str, new_name: str) -> onnx.ValueInfoProto:
    for out in graph.output:
        if out.name == name:
            info = onnx.ValueInfoProto()
            info.CopyFrom(out)
            info.name = new_name
            return info
    raise ValueError(f"model has no output {name!r} (outputs: {[o.name for o in graph.output]})")


def fuse_node_model(proba: onnx.ModelProto, scores: onnx.ModelProto | None = None,
                    scores_output: str = REGRESSOR_OUTPUT) -> bytes:
    """One graph computing a node's ``probabilities`` and (if ``scores``) ``action_scores``.

    Both models must take input ``x`` (the node's columns); ``proba`` must output
    ``probabilities``; ``scores_output`` names the output of ``scores`` that becomes
    ``action_scores`` [N, n_actions]. Internal names are prefixed (``p_``/``s_``) so they
    cannot clash; opset imports are merged (highest version per domain).
    """
    parts = [(proba, "p_", PROBA_OUTPUT, PROBA_OUTPUT)]
    if scores is not None:
        parts.append((scores, "s_", scores_output, ACTION_OUTPUT))
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    outputs: list[onnx.ValueInfoProto] = []
    opsets: dict[str, int] = {}
    x_info = None
    for model, prefix, out_name, final in parts:
        graph = model.graph
        real_inputs = [i for i in graph.input if i.name not in {t.name for t in graph.initializer}]
        if [i.name for i in real_inputs] != [MODEL_INPUT]:
            raise ValueError(f"model inputs must be exactly [{MODEL_INPUT!r}], got "
                             f"{[i.name for i in real_inputs]}")
        x_info = x_info or real_inputs[0]
        n, i = _prefixed(graph, prefix, {MODEL_INPUT: MODEL_INPUT, out_name: final})
        nodes += n
        inits += i
        outputs.append(_output_info(graph, out_name, final))
        for op in model.opset_import:
            opsets[op.domain] = max(opsets.get(op.domain, 0), op.version)
    assert x_info is not None
    graph = helper.make_graph(nodes, "adaptedge_node", [x_info], outputs, initializer=inits)
    fused = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v)
                                                    for d, v in sorted(opsets.items())],
                              producer_name="adaptedge")
    data: bytes = _finish(fused).SerializeToString()
    return data


# -- float32 thresholds ----------------------------------------------------------------------
def float32_thresholds(thresholds: npt.ArrayLike, mode: SplitMode = "BRANCH_LEQ"
                       ) -> npt.NDArray[np.float32]:
    """float32 thresholds that make the runtime decide exactly as float64 Python does.

    For every float32 input ``x``: ``x <= t64`` iff ``x <= t32`` (LEQ: ``t32`` is ``t64``
    rounded toward -inf), and ``x < t64`` iff ``x < t32`` (LT: rounded toward +inf).
    Plain ``astype(float32)`` rounds to nearest, which flips inputs between the two.
    """
    t64 = np.asarray(thresholds, dtype=np.float64)
    with np.errstate(over="ignore"):
        t32 = t64.astype(np.float32)
    if mode == "BRANCH_LEQ":
        fix = t32.astype(np.float64) > t64
        t32[fix] = np.nextafter(t32[fix], np.float32(-np.inf))
    elif mode == "BRANCH_LT":
        fix = t32.astype(np.float64) < t64
        t32[fix] = np.nextafter(t32[fix], np.float32(np.inf))
    else:
        raise ValueError(f"mode must be BRANCH_LEQ or BRANCH_LT, got {mode!r}")
    return t32


# -- hand-built models -----------------------------------------------------------------------
@dataclass(frozen=True)
class TreeArrays:
    """One regression tree as flat arrays over its nodes (node 0 is the root).

    ``feature[i]`` is the input column split on (-1 at a leaf); a row goes to ``left[i]``
    when ``x[feature] <= threshold[i]`` (``BRANCH_LEQ``; ``<`` with ``BRANCH_LT``), else to
    ``right[i]``; ``value[i]`` (shape [n_nodes, n_targets] or [n_nodes]) is used at leaves.
    Thresholds are float64 as Python decided; the exporter rounds them safely to float32.
    NaN inputs go right unless ``missing_left[i]`` is true.
    """

    feature: npt.NDArray[np.int64]
    threshold: npt.NDArray[np.float64]
    left: npt.NDArray[np.int64]
    right: npt.NDArray[np.int64]
    value: npt.NDArray[np.float64]
    missing_left: npt.NDArray[np.bool_] | None = None


def _transform(nodes: list[onnx.NodeProto], raw: str, output: str, transform: Transform,
               n_targets: int) -> int:
    """Append nodes mapping ``raw`` scores to ``output``; returns the output width."""
    if transform == "none":
        nodes.append(helper.make_node("Identity", [raw], [output]))
        return n_targets
    if transform == "softmax":
        nodes.append(helper.make_node("Softmax", [raw], [output], axis=1))
        return n_targets
    if transform == "binary":
        if n_targets != 1:
            raise ValueError("transform 'binary' needs exactly one logit per row")
        nodes += [helper.make_node("Sigmoid", [raw], ["p1"]),
                  helper.make_node("Sub", ["one", "p1"], ["p0"]),
                  helper.make_node("Concat", ["p0", "p1"], [output], axis=1)]
        return 2
    raise ValueError(f"unknown transform {transform!r} (none, softmax, binary)")


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], n_inputs: int,
           output: str, width: int, ml: bool) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "adaptedge_model",
        [helper.make_tensor_value_info(MODEL_INPUT, TensorProto.FLOAT, ["N", n_inputs])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["N", width])],
        initializer=inits)
    opsets = [helper.make_opsetid("", TARGET_OPSET)]
    if ml:
        opsets.append(helper.make_opsetid("ai.onnx.ml", ML_OPSET))
    return _finish(helper.make_model(graph, opset_imports=opsets, producer_name="adaptedge"))


def tree_ensemble_to_onnx(trees: Sequence[TreeArrays], n_inputs: int, n_targets: int, *,
                          base_values: npt.ArrayLike | None = None,
                          mode: SplitMode = "BRANCH_LEQ", output: str = REGRESSOR_OUTPUT,
                          transform: Transform = "none") -> onnx.ModelProto:
    """Sum of regression trees (+ ``base_values``) as ai.onnx.ml ``TreeEnsembleRegressor``.

    Raw score [N, n_targets] = base + sum of the trees' leaf values; ``transform`` then maps
    it to ``output``: "none" (scores, e.g. ``action_scores`` or ``variable``), "softmax"
    (multi-class logits -> ``probabilities``) or "binary" (one logit -> [1-p, p]).
    Thresholds are rounded with ``float32_thresholds`` for ``mode`` so routing matches the
    float64 Python trees on every float32 input. An ensemble of zero trees is allowed
    (constant ``base_values``).
    """
    base = (np.zeros(n_targets) if base_values is None
            else np.asarray(base_values, dtype=np.float64).reshape(n_targets))
    nodes: list[onnx.NodeProto] = []
    inits = [numpy_helper.from_array(np.ones((1, 1), np.float32), "one")] \
        if transform == "binary" else []
    parts: dict[str, list[Any]] = {k: [] for k in (
        "nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
        "nodes_truenodeids", "nodes_falsenodeids", "target_treeids", "target_nodeids",
        "target_ids", "target_weights", "nodes_missing_value_tracks_true")}
    for t, tree in enumerate(trees):
        feature = np.asarray(tree.feature, dtype=np.int64)
        n = len(feature)
        leaf = feature < 0
        values = np.asarray(tree.value, dtype=np.float64).reshape(n, -1)
        if values.shape[1] != n_targets:
            raise ValueError(f"tree {t} has {values.shape[1]} leaf values per node, expected "
                             f"{n_targets}")
        bad = np.flatnonzero(~leaf & (feature >= n_inputs))
        if bad.size:
            raise ValueError(f"tree {t} node {bad[0]} splits on column {feature[bad[0]]}, but "
                             f"the model has {n_inputs} inputs")
        thresholds = float32_thresholds(tree.threshold, mode)
        leaves = np.flatnonzero(leaf)
        parts["nodes_treeids"].append(np.full(n, t))
        parts["nodes_nodeids"].append(np.arange(n))
        parts["nodes_featureids"].append(np.where(leaf, 0, feature))
        parts["nodes_values"].append(np.where(leaf, np.float32(0), thresholds))
        parts["nodes_modes"].append(np.where(leaf, "LEAF", mode))
        parts["nodes_truenodeids"].append(np.where(leaf, 0, tree.left))
        parts["nodes_falsenodeids"].append(np.where(leaf, 0, tree.right))
        # zero leaf weights are left out (pure leaves of a many-class forest are mostly zeros)
        keep = values[leaves].ravel() != 0.0
        parts["target_treeids"].append(np.full(int(keep.sum()), t))
        parts["target_nodeids"].append(np.repeat(leaves, n_targets)[keep])
        parts["target_ids"].append(np.tile(np.arange(n_targets), len(leaves))[keep])
        parts["target_weights"].append(values[leaves].ravel()[keep])
        missing = np.zeros(n, bool) if tree.missing_left is None else tree.missing_left
        parts["nodes_missing_value_tracks_true"].append(np.where(leaf, 0, missing).astype(int))
    attrs = {k: np.concatenate(v).tolist() if v else [] for k, v in parts.items()}
    if trees:
        nodes.append(helper.make_node(
            "TreeEnsembleRegressor", [MODEL_INPUT], ["raw"], domain="ai.onnx.ml",
            n_targets=n_targets, aggregate_function="SUM", post_transform="NONE",
            base_values=[float(b) for b in base], **attrs))
    else:
        inits.append(numpy_helper.from_array(np.zeros((n_inputs, n_targets), np.float32), "W0"))
        inits.append(numpy_helper.from_array(base.astype(np.float32), "b0"))
        nodes += [helper.make_node("MatMul", [MODEL_INPUT, "W0"], ["xw"]),
                  helper.make_node("Add", ["xw", "b0"], ["raw"])]
    width = _transform(nodes, "raw", output, transform, n_targets)
    return _model(nodes, inits, n_inputs, output, width, ml=bool(trees))


def linear_to_onnx(coef: npt.ArrayLike, intercept: npt.ArrayLike, *,
                   output: str = REGRESSOR_OUTPUT, transform: Transform = "none"
                   ) -> onnx.ModelProto:
    """``x @ coef + intercept`` (coef [n_inputs, n_outputs]) then ``transform`` (see above).

    Zero inputs (``coef`` of shape [0, k]) are allowed: a constant model for a root node.
    """
    W = np.asarray(coef, dtype=np.float32)
    if W.ndim != 2:
        raise ValueError(f"coef must be 2-D [n_inputs, n_outputs], got shape {W.shape}")
    b = np.asarray(intercept, dtype=np.float32).reshape(W.shape[1])
    n_inputs, n_out = W.shape
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")]
    if transform == "binary":
        inits.append(numpy_helper.from_array(np.ones((1, 1), np.float32), "one"))
    nodes = [helper.make_node("MatMul", [MODEL_INPUT, "W"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["raw"])]
    width = _transform(nodes, "raw", output, transform, n_out)
    return _model(nodes, inits, n_inputs, output, width, ml=False)


def run_onnx(model: onnx.ModelProto | bytes, X: npt.ArrayLike, output: str | None = None
             ) -> npt.NDArray[np.float32]:
    """Run a model on float32 rows with onnxruntime (one thread) and return one output."""
    import onnxruntime as ort

    data = model if isinstance(model, bytes) else model.SerializeToString()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    session = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    name = output or (PROBA_OUTPUT if PROBA_OUTPUT in names else names[0])
    x = np.ascontiguousarray(np.asarray(X, dtype=np.float32).reshape(np.shape(X)[0], -1))
    result: npt.NDArray[np.float32] = np.asarray(session.run([name], {MODEL_INPUT: x})[0],
                                                 dtype=np.float32)
    return result


# -- scikit-learn tree ensembles, exported with the tree builder ------------------------------
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
    if isinstance(estimator, HistGradientBoostingClassifier):
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
        if k_raw == 1:
            model = tree_ensemble_to_onnx(trees, n_inputs, 1, base_values=base,
                                          output="binary_proba", transform="binary")
        else:
            model = tree_ensemble_to_onnx(trees, n_inputs, k_raw, base_values=base,
                                          output="binary_proba", transform="softmax")
        return _scatter_columns(model, "binary_proba", cols, width)
    return None


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
    graph.output.append(helper.make_tensor_value_info(PROBA_OUTPUT, TensorProto.FLOAT,
                                                      ["N", width]))
    return _finish(model)
