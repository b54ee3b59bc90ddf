"""An ai.onnx.ml ``TreeEnsembleRegressor`` as C if/else statements, deciding as onnxruntime does.

Each split compares the float32 input with the float32 threshold the ONNX file holds, in the
node's own mode (``BRANCH_LEQ``: ``x <= t``, ``BRANCH_LT``, ``BRANCH_GTE``, ``BRANCH_GT``,
``BRANCH_EQ``, ``BRANCH_NEQ``), without a float operation: ``float_key`` maps finite float32
values to int32 keys in the same order (-0 and +0 equal), and each input is first placed among
its feature's sorted thresholds (``Bins``: how many are below it, and at most it), so a split
compares a small integer with a constant (``x <= T[k]`` iff fewer than k+1 thresholds lie
below x). A soft-float core then spends no float call on routing, and the code stays small. The library's inputs are always finite (a non-finite read is a failed read, its columns
0), so no NaN reaches a split and ``nodes_missing_value_tracks_true`` never applies. Leaf weights are added per target in float32, tree
after tree in the order of the file, then the base values, as onnxruntime's SUM aggregator
does. Anything else (another aggregate function, a post-transform, a base value onnxruntime
would add only on some paths) is refused, naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from adaptedge.trainer.errors import ExportError
from adaptedge.trainer.export.c.literals import array_body, f32

_COMPARE = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")
MAX_DEPTH = 256

KEY_SOURCE = r"""
/* float32 -> int32 in the same order for finite values (-0 and +0 both 0). */
static int32_t ae_key(float v)
{
    union { float f; int32_t i; } u;
    u.f = v;
    if (u.i >= 0) return u.i;
    u.i ^= 0x7FFFFFFF;
    return u.i == -1 ? 0 : u.i;
}

/* How many of the n sorted keys lie below k (or_equal: at most k). */
static unsigned ae_count(const int32_t *keys, unsigned n, int32_t k, int or_equal)
{
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (keys[mid] < k || (or_equal && keys[mid] == k)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}
"""
_NEEDS = {"BRANCH_LEQ": "lt", "BRANCH_GT": "lt", "BRANCH_LT": "le", "BRANCH_GTE": "le",
          "BRANCH_EQ": "both", "BRANCH_NEQ": "both"}


def float_key(value: float) -> int:
    """``ae_key`` of a float32 value (refuses NaN)."""
    v = np.float32(value)
    if np.isnan(v):
        raise ExportError("a tree threshold is NaN, which the C exporter cannot express")
    i = int(np.array([v], np.float32).view(np.int32)[0])
    if i >= 0:
        return i
    i ^= 0x7FFFFFFF
    return 0 if i == -1 else i


@dataclass
class Bins:
    """Per model input: the sorted keys of every threshold it is split on, and which counts
    the splits need (``lt``: thresholds below x; ``le``: at most x)."""

    keys: dict[int, list[int]] = field(default_factory=dict)
    needs: dict[int, set[str]] = field(default_factory=dict)

    @classmethod
    def collect(cls, nodes: Sequence[onnx.NodeProto]) -> Bins:
        found: dict[int, set[int]] = {}
        bins = cls()
        for node in nodes:
            for tree in _trees(_attrs(node)).values():
                for n in tree.values():
                    if n.mode == "LEAF":
                        continue
                    found.setdefault(n.feature, set()).add(float_key(n.value))
                    need = _NEEDS[n.mode]
                    bins.needs.setdefault(n.feature, set()).update(
                        ("lt", "le") if need == "both" else (need,))
        bins.keys = {f: sorted(keys) for f, keys in sorted(found.items())}
        return bins

    def statements(self, x: Sequence[str]) -> list[str]:
        """Threshold tables and the counts ``lt{f}``/``le{f}`` of input ``f`` (``x[f]`` its
        C expression). The counts are ``volatile``: otherwise compilers thread jumps across
        trees testing the same count and copy code paths combinatorially (2-4x the flash)."""
        lines = []
        for f, keys in self.keys.items():
            if f >= len(x):
                raise ExportError(f"a tree splits on input {f}, but the model has {len(x)} inputs")
            body = ", ".join(_int_literal(k) for k in keys)
            lines.append(f"static const int32_t b{f}[{len(keys)}] = {{ {body} }};")
            for count in sorted(self.needs[f]):
                lines.append(f"volatile unsigned {count}{f} = ae_count(b{f}, {len(keys)}, "
                             f"ae_key({x[f]}), {int(count == 'le')});")
        return lines

    def test(self, n: _Node) -> str:
        """The C condition of split ``n``."""
        k = self.keys[n.feature].index(float_key(n.value))
        lt, le = f"lt{n.feature}", f"le{n.feature}"
        return {"BRANCH_LEQ": f"{lt} <= {k}", "BRANCH_GT": f"{lt} > {k}",
                "BRANCH_LT": f"{le} <= {k}", "BRANCH_GTE": f"{le} > {k}",
                "BRANCH_EQ": f"{lt} == {k} && {le} > {k}",
                "BRANCH_NEQ": f"{lt} != {k} || {le} <= {k}"}[n.mode]


def _int_literal(key: int) -> str:
    return f"(-{-key - 1} - 1)" if key < 0 else str(key)


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


def tree_statements(node: onnx.NodeProto, bins: Bins, out: str) -> list[str]:
    """C statements setting float ``out[n_targets]`` from the counts of ``bins.statements``."""
    attrs = _attrs(node)
    _check(node, attrs)
    n_targets = int(attrs.get("n_targets", 1))
    base = [float(v) for v in attrs.get("base_values", [])] or [0.0] * n_targets
    trees = _trees(attrs)
    for j, b in enumerate(base):
        if b != 0.0 and not any(_covers(t, j) for t in trees.values()):
            raise ExportError(f"{node.op_type} target {j} has a base value onnxruntime adds only "
                              "on some paths, which the C exporter cannot express")
    order = list(trees)
    leaves = {t: sorted(nid for nid, n in trees[t].items() if n.mode == "LEAF") for t in order}
    widest = max((len(v) for v in leaves.values()), default=1)
    index_type = "unsigned char" if widest <= 256 else "uint16_t" if widest <= 65536 else "uint32_t"
    lines = [f"{out}[{j}] = 0.0f;" for j in range(n_targets)]
    lines += ["{", f"{index_type} leaf[{max(len(order), 1)}];", "unsigned n;"]
    for position, tree_id in enumerate(order):
        if 0 not in trees[tree_id]:
            raise ExportError(f"tree {tree_id} has no node 0 (root), which the C exporter "
                              "cannot express")
        lines += _emit(trees[tree_id], tree_id, bins, position,
                       {nid: i for i, nid in enumerate(leaves[tree_id])})
    for t in range(n_targets):
        lines += _leaf_sums([(p, trees[tree_id], leaves[tree_id])
                             for p, tree_id in enumerate(order)], t, f"{out}_{t}", f"{out}[{t}]")
    lines.append("}")
    lines += [f"{out}[{j}] += {f32(b)};" for j, b in enumerate(base) if b != 0.0]
    return lines


def _leaf_sums(trees: list[tuple[int, dict[int, _Node], list[int]]], target: int, name: str,
               acc: str) -> list[str]:
    """After the trees: add to ``acc``, tree after tree, the weight for ``target`` of the leaf
    each reached (``leaf[p]``), from one table (0.0f where a leaf names no weight: adding +0
    changes no sum that started at +0, so this equals onnxruntime adding named weights only).
    One loop, not code per leaf: the compiler cannot copy later code into every leaf."""
    weights: list[str] = []
    offsets: list[int] = []
    positions: list[int] = []
    for position, tree, leaves in trees:
        named = [[w for t, w in tree[nid].weights if t == target] for nid in leaves]
        if not any(named):
            continue
        if any(len(w) > 1 for w in named):
            raise ExportError(f"a leaf names target {target} twice, which the C exporter does "
                              "not express")
        positions.append(position)
        offsets.append(len(weights))
        weights += [f32(w[0]) if w else "0.0f" for w in named]
    if not positions:
        return []
    kind = "uint16_t" if max(offsets[-1], positions[-1]) < 65536 else "uint32_t"
    lines = [f"static const float w{name}[{len(weights)}] = {{\n"
             f"{array_body(weights)}\n}};",
             f"static const {kind} o{name}[{len(offsets)}] = {{\n"
             f"{array_body(map(str, offsets), per_line=16)}\n}};"]
    if positions == list(range(len(trees))):
        lines.append(f"for (n = 0; n < {len(positions)}; n++) {acc} += w{name}[o{name}[n] + "
                     "leaf[n]];")
        return lines
    lines.append(f"static const {kind} p{name}[{len(positions)}] = {{\n"
                 f"{array_body(map(str, positions), per_line=16)}\n}};")
    lines.append(f"for (n = 0; n < {len(positions)}; n++) {acc} += w{name}[o{name}[n] + "
                 f"leaf[p{name}[n]]];")
    return lines


def _emit(tree: dict[int, _Node], tree_id: int, bins: Bins, position: int,
          leaf_index: dict[int, int]) -> list[str]:
    """One tree as nested if/else setting ``leaf[position]`` to the reached leaf's index
    (iterative: no Python recursion limit)."""
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
            lines.append(f"{pad}leaf[{position}] = {leaf_index[nid]};")
            continue
        lines.append(f"{pad}if ({bins.test(n)}) {{ /* x{n.feature} vs {np.float32(n.value)!r} */")
        stack += [("text", 1, depth), ("node", n.false, depth + 1), ("text", 0, depth),
                  ("node", n.true, depth + 1)]
    return lines
