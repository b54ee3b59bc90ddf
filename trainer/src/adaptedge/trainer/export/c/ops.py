"""One node model's ONNX graph as one C function, op by op, over float32 row vectors.

Every tensor of a node model is one row ``[1, w]`` (or a constant): the function
``void NAME(const float *x, float *proba, float *scores)`` reads the model's inputs from the
decision's feature buffer ``x`` (columns ``model.inputs``) and writes ``probabilities`` and
``action_scores`` (or, for a node with an action head, the head applied to ``action_basis``). The ops the trainer's exporters write are translated (tree ensembles,
``MatMul``/``Add``/``Sub``/``Mul``/``Neg``/``Abs``/``Relu``, ``Sigmoid``/``Softmax`` (libm
``expf``), ``Concat``/``Slice``/``Identity``, ``ReduceMax``, ``TopK`` values, comparisons
and their ``Cast`` to float); any other op or
shape is refused with an ``ExportError`` naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper

from adaptedge.protocol.action_head import BASIS_OUTPUT, ActionHead
from adaptedge.protocol.onnx_contract import ACTION_OUTPUT, MODEL_INPUT, PROBA_OUTPUT
from adaptedge.trainer.errors import ExportError
from adaptedge.trainer.export.c.literals import array_body, f32
from adaptedge.trainer.export.c.tree_code import Bins, tree_statements

F32 = npt.NDArray[np.float32]


@dataclass
class Var:
    """A computed row vector: C array ``name`` of ``width`` floats."""

    name: str
    width: int


Value = Var | np.ndarray


@dataclass
class Program:
    """The C function being built: its statements, the values by ONNX name, libm use."""

    name: str
    columns: Sequence[int]
    lines: list[str] = field(default_factory=list)
    values: dict[str, Value] = field(default_factory=dict)
    uses_expf: bool = False
    graph_nodes: Sequence[onnx.NodeProto] = ()
    bins: Bins | None = None
    """The inputs' threshold counts, once a tree ensemble needs them."""
    _count: int = 0

    @property
    def keyed(self) -> bool:
        """The function uses ``ae_key``/``ae_count`` (tree ensembles)."""
        return self.bins is not None

    def new(self, width: int) -> Var:
        self._count += 1
        var = Var(f"t{self._count}", width)
        self.lines.append(f"float {var.name}[{max(width, 1)}];")  # C has no empty arrays
        return var

    def const(self, array: F32) -> str:
        """A static const array holding ``array`` (flattened); returns its name."""
        self._count += 1
        name = f"k{self._count}"
        flat = np.asarray(array, np.float32).ravel()
        self.lines.append(f"static const float {name}[{max(flat.size, 1)}] = {{\n"
                          f"{array_body(f32(v) for v in flat)}\n}};")
        return name


def _attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _width(value: Value) -> int:
    return value.width if isinstance(value, Var) else int(np.asarray(value).size)


def _ref(p: Program, value: Value, i: str) -> str:
    """C expression for element ``i`` of ``value`` (broadcast when it has one element)."""
    if isinstance(value, Var):
        return f"{value.name}[0]" if value.width == 1 else f"{value.name}[{i}]"
    flat = np.asarray(value, np.float32).ravel()
    if flat.size == 1:
        return f32(flat[0])
    return f"{p.const(flat)}[{i}]"


def _elementwise(p: Program, inputs: list[Value], expr: Callable[[list[str]], str]) -> Value:
    widths = [_width(v) for v in inputs]
    width = max(widths)
    if any(w not in (1, width) for w in widths):
        raise ExportError(f"elementwise op on widths {widths} is not expressible by the C "
                          "exporter")
    if not any(isinstance(v, Var) for v in inputs):  # constant folding, in float32
        raise ExportError("an op on constants only is not expressible by the C exporter")
    refs = [_ref(p, v, "i") for v in inputs]
    out = p.new(width)
    p.lines.append(f"for (i = 0; i < {width}; i++) {out.name}[i] = {expr(refs)};")
    return out


def _matmul(p: Program, a: Value, w: Value) -> Var:
    if not isinstance(a, Var) or isinstance(w, Var) or np.asarray(w).ndim != 2:
        raise ExportError("MatMul other than row @ constant matrix is not expressible by the "
                          "C exporter")
    W = np.asarray(w, np.float32)
    if W.shape[0] != a.width:
        raise ExportError(f"MatMul of width {a.width} by {W.shape} does not fit")
    k = p.const(W)
    out = p.new(W.shape[1])
    p.lines.append(f"for (j = 0; j < {W.shape[1]}; j++) {{ float acc = 0.0f; "
                   f"for (i = 0; i < {W.shape[0]}; i++) acc += {a.name}[i] * {k}[i * "
                   f"{W.shape[1]} + j]; {out.name}[j] = acc; }}")
    return out


def _axis_one(node: onnx.NodeProto, axis: object) -> None:
    if axis not in (1, -1):
        raise ExportError(f"{node.op_type} on axis {axis} is not expressible by the C exporter "
                          "(rows only)")


def _softmax(p: Program, node: onnx.NodeProto, a: Var) -> Var:
    _axis_one(node, _attr(node, "axis", -1))
    p.uses_expf = True
    out = p.new(a.width)
    p.lines.append(
        f"{{ float m = {a.name}[0], s = 0.0f, inv; for (i = 1; i < {a.width}; i++) "
        f"if ({a.name}[i] > m) m = {a.name}[i];\n"
        f"  for (i = 0; i < {a.width}; i++) {{ {out.name}[i] = expf({a.name}[i] - m); "
        f"s += {out.name}[i]; }}\n"
        f"  inv = 1.0f / s; for (i = 0; i < {a.width}; i++) {out.name}[i] *= inv; }}")
    return out


def _slice(p: Program, node: onnx.NodeProto, a: Var, rest: list[Value]) -> Var:
    consts = [np.asarray(v).ravel() for v in rest]
    if any(isinstance(v, Var) for v in rest) or any(c.size != 1 for c in consts):
        raise ExportError("Slice with computed or multi-axis bounds is not expressible by the C "
                          "exporter")
    start, end = int(consts[0][0]), int(consts[1][0])
    axis = int(consts[2][0]) if len(consts) > 2 else 0
    step = int(consts[3][0]) if len(consts) > 3 else 1
    _axis_one(node, axis)
    if step != 1:
        raise ExportError(f"Slice with step {step} is not expressible by the C exporter")
    start, end = (max(0, min(v + a.width if v < 0 else v, a.width)) for v in (start, end))
    out = p.new(max(end - start, 0))
    p.lines.append(f"for (i = 0; i < {out.width}; i++) {out.name}[i] = {a.name}[{start} + i];")
    return out


def _concat(p: Program, node: onnx.NodeProto, inputs: list[Value]) -> Var:
    _axis_one(node, _attr(node, "axis"))
    out = p.new(sum(_width(v) for v in inputs))
    at = 0
    for v in inputs:
        w = _width(v)
        p.lines.append(f"for (i = 0; i < {w}; i++) {out.name}[{at} + i] = {_ref(p, v, 'i')};")
        at += w
    return out


def _reduce_max(p: Program, node: onnx.NodeProto, a: Var, rest: list[Value]) -> Var:
    axes = _attr(node, "axes")
    if axes is None and rest and not isinstance(rest[0], Var):
        axes = [int(v) for v in np.asarray(rest[0]).ravel()]
    if list(axes or []) not in ([1], [-1]) or _attr(node, "keepdims", 1) != 1:
        raise ExportError("ReduceMax other than over a row with keepdims is not expressible by "
                          "the C exporter")
    out = p.new(1)
    p.lines.append(f"{out.name}[0] = {a.name}[0]; for (i = 1; i < {a.width}; i++) "
                   f"if ({a.name}[i] > {out.name}[0]) {out.name}[0] = {a.name}[i];")
    return out


def _topk(p: Program, node: onnx.NodeProto, a: Var, k_value: Value) -> Var:
    _axis_one(node, _attr(node, "axis", -1))
    if _attr(node, "largest", 1) != 1 or _attr(node, "sorted", 1) != 1 or isinstance(k_value,
                                                                                       Var):
        raise ExportError("TopK other than the largest k, sorted, is not expressible by the C "
                          "exporter")
    k = int(np.asarray(k_value).ravel()[0])
    out = p.new(k)
    # selection: the r-th pick is the first largest value not picked yet (ties: lower index)
    p.lines.append(
        f"{{ unsigned char used[{a.width}] = {{0}}; int r, best;\n"
        f"  for (r = 0; r < {k}; r++) {{ best = -1; for (i = 0; i < {a.width}; i++) "
        f"if (!used[i] && (best < 0 || {a.name}[i] > {a.name}[best])) best = i;\n"
        f"    used[best] = 1; {out.name}[r] = {a.name}[best]; }} }}")
    return out


_UNARY = {"Neg": "-{0}", "Abs": "({0} < 0.0f ? -{0} : {0})", "Relu": "({0} > 0.0f ? {0} : 0.0f)",
          "Identity": "{0}", "Sigmoid": "1.0f / (1.0f + expf(-{0}))"}
_BINARY = {"Add": "{0} + {1}", "Sub": "{0} - {1}", "Mul": "{0} * {1}",
           "Greater": "({0} > {1} ? 1.0f : 0.0f)", "GreaterOrEqual": "({0} >= {1} ? 1.0f : 0.0f)",
           "Less": "({0} < {1} ? 1.0f : 0.0f)", "LessOrEqual": "({0} <= {1} ? 1.0f : 0.0f)",
           "Equal": "({0} == {1} ? 1.0f : 0.0f)"}
"""Comparisons give booleans, held as 0.0f/1.0f (``Cast`` to float keeps them)."""


def _apply(p: Program, node: onnx.NodeProto) -> list[Value]:
    op = node.op_type
    if op == "TreeEnsembleRegressor":
        if list(node.input) != [MODEL_INPUT]:
            raise ExportError("a tree ensemble on a computed input is not expressible by the C "
                              "exporter")
        n_targets = int(_attr(node, "n_targets", 1))
        if p.bins is None:  # every ensemble of the model shares the inputs' threshold counts
            p.bins = Bins.collect([n for n in p.graph_nodes if n.op_type == op])
            p.lines += p.bins.statements([f"x[{c}]" for c in p.columns])
        out = p.new(n_targets)
        p.lines += tree_statements(node, p.bins, out.name)
        return [out]
    missing = [n for n in node.input if n and n not in p.values]
    if missing:
        raise ExportError(f"ONNX op {op} reads {missing[0]!r}, which no earlier node computes")
    args = [p.values[n] for n in node.input if n]
    if op in _UNARY and len(args) == 1:
        p.uses_expf |= op == "Sigmoid"
        return [_elementwise(p, args, lambda r: _UNARY[op].format(*r))]
    if op in _BINARY and len(args) == 2:
        return [_elementwise(p, args, lambda r: _BINARY[op].format(*r))]
    if op == "MatMul":
        return [_matmul(p, args[0], args[1])]
    if op == "Cast" and _attr(node, "to") == onnx.TensorProto.FLOAT and len(args) == 1:
        return args  # from float, or from a comparison's 0.0f/1.0f
    first = args[0] if args else None
    if not isinstance(first, Var):
        raise ExportError(f"ONNX op {op} is not expressible by the C exporter")
    if op == "Softmax":
        return [_softmax(p, node, first)]
    if op == "Slice":
        return [_slice(p, node, first, args[1:])]
    if op == "Concat":
        return [_concat(p, node, args)]
    if op == "ReduceMax":
        return [_reduce_max(p, node, first, args[1:])]
    if op == "TopK":
        return [_topk(p, node, first, args[1])]
    raise ExportError(f"ONNX op {op} is not expressible by the C exporter")


def node_function(model: onnx.ModelProto, name: str, columns: Sequence[int], n_classes: int,
                  n_actions: int, head: ActionHead | None = None) -> Program:
    """The C function ``name`` computing ``model`` (its input ``x`` = feature ``columns``);
    with ``head`` (``protocol.action_head``) the scores are the head applied to the model's
    ``action_basis``."""
    graph = model.graph
    p = Program(name, columns, graph_nodes=list(graph.node))
    p.values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if MODEL_INPUT in node.input and node.op_type != "TreeEnsembleRegressor" and (
                MODEL_INPUT not in p.values):
            p.values[MODEL_INPUT] = _gather(p, columns)
        if node.op_type == "TopK" and len(node.output) > 1 and any(
                node.output[1] in other.input for other in graph.node):
            raise ExportError("TopK indices used downstream are not expressible by the C "
                              "exporter")
        if node.op_type == "Constant":
            p.values[node.output[0]] = numpy_helper.to_array(_attr(node, "value"))
            continue
        for out_name, value in zip(node.output, _apply(p, node), strict=False):
            p.values[out_name] = value
    p.lines += _store(p, PROBA_OUTPUT, "proba", n_classes)
    if n_actions > 1 and head is not None:
        p.lines += _head(p, head)
    elif n_actions > 1:
        p.lines += _store(p, ACTION_OUTPUT, "scores", n_actions)
    return p


def _head(p: Program, head: ActionHead) -> list[str]:
    """``scores[j] = ((basis[0] * W[0][j] + basis[1] * W[1][j]) + ...) + bias[j]`` in float,
    in ``protocol.action_head.apply_head``'s order (compiled with -ffp-contract=off)."""
    basis = p.values.get(BASIS_OUTPUT)
    if not isinstance(basis, Var) or basis.width != head.basis_width:
        raise ExportError(f"the node model's {BASIS_OUTPUT!r} is not a computed row of "
                          f"{head.basis_width} values (its action head's basis)")
    lines = []
    for j, b in enumerate(head.bias):
        terms = [f"{basis.name}[{i}] * {f32(row[j])}" for i, row in enumerate(head.weights)]
        expr = terms[0]
        for term in terms[1:]:
            expr = f"({expr}) + {term}"
        lines.append(f"scores[{j}] = ({expr}) + {f32(b)};")
    return lines


def _gather(p: Program, columns: Sequence[int]) -> Var:
    """The model's input row as its own array (once), for ops other than trees."""
    out = p.new(len(columns))
    p.lines += [f"{out.name}[{i}] = x[{c}];" for i, c in enumerate(columns)]
    return out


def _store(p: Program, onnx_name: str, target: str, width: int) -> list[str]:
    value = p.values.get(onnx_name)
    if not isinstance(value, Var) or value.width != width:
        raise ExportError(f"the node model's {onnx_name!r} is not a computed row of {width} "
                          "values, which the C exporter cannot express")
    return [f"for (i = 0; i < {width}; i++) {target}[i] = {value.name}[i];"]


def c_function(p: Program) -> str:
    """The function's C text."""
    body = "\n".join("    " + line.replace("\n", "\n    ") for line in p.lines)
    return (f"static void {p.name}(const float *x, float *proba, float *scores)\n{{\n"
            f"    int i, j;\n    (void)x; (void)i; (void)j; (void)scores;\n{body}\n}}\n")
