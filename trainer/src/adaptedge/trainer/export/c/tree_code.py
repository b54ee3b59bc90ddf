"""An ai.onnx.ml ``TreeEnsembleRegressor`` as C if/else statements, deciding as onnxruntime does.

Each split compares the float32 input with the float32 threshold the ONNX file holds, in the
node's own mode (``BRANCH_LEQ``: ``x <= t``, ``BRANCH_LT``, ``BRANCH_GTE``, ``BRANCH_GT``,
``BRANCH_EQ``, ``BRANCH_NEQ``); a NaN input takes the true branch only where
``nodes_missing_value_tracks_true`` says so. Leaf weights are added per target in float32, tree
after tree in the order of the file, then the base values, as onnxruntime's SUM aggregator
does. Anything else (another aggregate function, a post-transform, a base value onnxruntime
would add only on some paths) is refused, naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import helper

from adaptedge.trainer.errors import ExportError
from adaptedge.trainer.export.c.literals import f32

_COMPARE = {"BRANCH_LEQ": "<=", "BRANCH_LT": "<", "BRANCH_GTE": ">=", "BRANCH_GT": ">",
            "BRANCH_EQ": "==", "BRANCH_NEQ": "!="}
MAX_DEPTH = 256


@dataclass
class _Node:
    mode: str
    feature: int = 0
    value: float = 0.0
    true: int = 0
    false: int = 0
    missing_true: bool = False
    weights: list[tuple[int, float]] = field(default_factory=list)


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        out[a.name] = value.decode() if isinstance(value, bytes) else value
    return out


def _trees(attrs: dict[str, Any]) -> dict[int, dict[int, _Node]]:
    """Tree id -> node id -> node (in file order of the trees)."""
    modes = [m.decode() if isinstance(m, bytes) else m for m in attrs["nodes_modes"]]
    n = len(modes)
    missing = attrs.get("nodes_missing_value_tracks_true") or [0] * n
    trees: dict[int, dict[int, _Node]] = {}
    for i in range(n):
        tree, nid, mode = int(attrs["nodes_treeids"][i]), int(attrs["nodes_nodeids"][i]), modes[i]
        if mode != "LEAF" and mode not in _COMPARE:
            raise ExportError(f"tree {tree} node {nid} has split mode {mode!r}, which the C "
                              "exporter cannot express")
        trees.setdefault(tree, {})[nid] = _Node(
            mode, int(attrs["nodes_featureids"][i]), float(attrs["nodes_values"][i]),
            int(attrs["nodes_truenodeids"][i]), int(attrs["nodes_falsenodeids"][i]),
            bool(missing[i]))
    for t, nid, target, w in zip(attrs.get("target_treeids", []), attrs.get("target_nodeids", []),
                                 attrs.get("target_ids", []), attrs.get("target_weights", []),
                                 strict=True):
        trees[int(t)][int(nid)].weights.append((int(target), float(w)))
    return trees


def _check(node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    unsupported = sorted(k for k in attrs if k.endswith("_as_tensor") or k == "nodes_hitrates_x")
    if unsupported:
        raise ExportError(f"{node.op_type} attribute {unsupported[0]!r} (double thresholds) is "
                          "not expressible by the C exporter")
    aggregate = attrs.get("aggregate_function", "SUM")
    transform = attrs.get("post_transform", "NONE")
    if aggregate != "SUM" or transform != "NONE":
        raise ExportError(f"{node.op_type} with aggregate_function={aggregate} and "
                          f"post_transform={transform} is not expressible by the C exporter "
                          "(only SUM and NONE)")


def _covers(tree: dict[int, _Node], target: int) -> bool:
    """Every leaf of ``tree`` names ``target`` (so onnxruntime adds its base value)."""
    return all(any(t == target for t, _ in n.weights) for n in tree.values() if n.mode == "LEAF")


def tree_statements(node: onnx.NodeProto, columns: Sequence[str], out: str) -> list[str]:
    """C statements setting float ``out[n_targets]`` from the inputs ``columns`` (C lvalue
    expressions of the model's input positions)."""
    attrs = _attrs(node)
    _check(node, attrs)
    n_targets = int(attrs.get("n_targets", 1))
    base = [float(v) for v in attrs.get("base_values", [])] or [0.0] * n_targets
    trees = _trees(attrs)
    for j, b in enumerate(base):
        if b != 0.0 and not any(_covers(t, j) for t in trees.values()):
            raise ExportError(f"{node.op_type} target {j} has a base value onnxruntime adds only "
                              "on some paths, which the C exporter cannot express")
    lines = [f"{out}[{j}] = 0.0f;" for j in range(n_targets)]
    for tree_id, tree in trees.items():
        if 0 not in tree:
            raise ExportError(f"tree {tree_id} has no node 0 (root), which the C exporter "
                              "cannot express")
        lines += _emit(tree, tree_id, columns, out)
    lines += [f"{out}[{j}] += {f32(b)};" for j, b in enumerate(base) if b != 0.0]
    return lines


def _emit(tree: dict[int, _Node], tree_id: int, columns: Sequence[str], out: str) -> list[str]:
    """One tree as nested if/else (iterative: no Python recursion limit)."""
    lines: list[str] = [f"/* tree {tree_id} */"]
    stack: list[tuple[str, int, int]] = [("node", 0, 0)]
    while stack:
        what, nid, depth = stack.pop()
        pad = "    " * depth
        if what == "text":
            lines.append(pad + ("} else {" if nid == 0 else "}"))
            continue
        if depth > MAX_DEPTH:
            raise ExportError(f"tree {tree_id} is deeper than {MAX_DEPTH}, which the C exporter "
                              "does not emit")
        n = tree.get(nid)
        if n is None:
            raise ExportError(f"tree {tree_id} names missing node {nid}")
        if n.mode == "LEAF":
            lines += [f"{pad}{out}[{t}] += {f32(w)};" for t, w in n.weights]
            continue
        if n.feature >= len(columns):
            raise ExportError(f"tree {tree_id} node {nid} reads input {n.feature}, but the "
                              f"model has {len(columns)} inputs")
        x = columns[n.feature]
        test = f"{x} {_COMPARE[n.mode]} {f32(n.value)}"
        if n.missing_true:
            test = f"({test}) || ({x} != {x})"
        lines.append(f"{pad}if ({test}) {{")
        stack += [("text", 1, depth), ("node", n.false, depth + 1), ("text", 0, depth),
                  ("node", n.true, depth + 1)]
    return lines
