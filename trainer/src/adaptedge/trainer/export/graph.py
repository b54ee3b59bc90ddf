"""Building one ONNX model: the only place product code calls ``make_graph``/``make_model``.

``GraphBuilder`` collects nodes, initializers and outputs over input ``x`` and turns them
into a checked model at the versions of ``protocol.onnx_contract`` (``ai.onnx.ml`` is
imported only when a node uses it). ``assemble`` does the same for parts taken from other
models (fusion); ``finish`` pins the versions of a model built elsewhere (skl2onnx).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from adaptedge.protocol.onnx_contract import IR_VERSION, MODEL_INPUT, OPSETS

PRODUCER = "adaptedge"
GRAPH_NAME = "adaptedge_node"
REGRESSOR_OUTPUT = "variable"
"""The raw-score output of hand-built models and skl2onnx regressors (not in the contract)."""


def float_info(name: str, width: int | None) -> onnx.ValueInfoProto:
    """A float32 [N, width] tensor description."""
    info: onnx.ValueInfoProto = helper.make_tensor_value_info(
        name, TensorProto.FLOAT, ["N", width])
    return info


class GraphBuilder:
    """A graph from input ``x`` float32 [N, n_inputs]: add nodes, constants and outputs, then
    ``model()`` or ``to_bytes()``."""

    def __init__(self, n_inputs: int) -> None:
        self.n_inputs = n_inputs
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.opsets: dict[str, int] = {}

    def include(self, model: onnx.ModelProto) -> None:
        """Take over the nodes, constants, outputs and opsets of ``model`` (input ``x``), to
        add a head after them."""
        self.nodes += model.graph.node
        self.initializers += model.graph.initializer
        self.outputs += model.graph.output
        for op in model.opset_import:
            self.opsets[op.domain] = max(self.opsets.get(op.domain, 0), op.version)

    def add(self, op: str, inputs: Sequence[str], outputs: Sequence[str], *,
            domain: str = "", **attrs: Any) -> None:
        """Append one operator node. A 1-D numpy array of integers, floats or bytes becomes
        an INTS, FLOATS or STRINGS attribute (``fill_array_attribute``); other values go through
        ``helper.make_attribute``. The node is the one ``helper.make_node`` makes."""
        node = helper.make_node(op, list(inputs), list(outputs), domain=domain)
        for key, value in sorted(attrs.items()):
            if isinstance(value, np.ndarray):  # filled in place: a copy costs as much again
                fill_array_attribute(node.attribute.add(), key, value)
            elif value is not None:
                node.attribute.append(helper.make_attribute(key, value))
        self.nodes.append(node)

    def const(self, name: str, values: npt.ArrayLike, dtype: npt.DTypeLike = np.float32) -> str:
        """Add an initializer holding ``values``; returns its name."""
        self.initializers.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name

    def output(self, name: str, width: int) -> None:
        """Declare ``name`` float32 [N, width] a graph output."""
        self.outputs.append(float_info(name, width))

    def model(self) -> onnx.ModelProto:
        """The checked model (default opset, plus ``ai.onnx.ml`` when a node uses it)."""
        domains = {node.domain for node in self.nodes} | {""}
        opsets = {d: v for d, v in OPSETS.items() if d in domains}
        for domain, version in self.opsets.items():
            opsets[domain] = max(opsets.get(domain, 0), version)
        return assemble(self.nodes, self.initializers, float_info(MODEL_INPUT, self.n_inputs),
                        self.outputs, opsets)

    def to_bytes(self) -> bytes:
        data: bytes = self.model().SerializeToString()
        return data


_ARRAY_ATTRIBUTES = {"i": ("ints", onnx.AttributeProto.INTS),
                     "u": ("ints", onnx.AttributeProto.INTS),
                     "f": ("floats", onnx.AttributeProto.FLOATS),
                     "S": ("strings", onnx.AttributeProto.STRINGS)}


def fill_array_attribute(attr: onnx.AttributeProto, name: str, values: npt.NDArray[Any]
                         ) -> None:
    """Make ``attr`` the attribute ``helper.make_attribute(name, values.tolist())`` makes,
    without its per-element type inference and encoding (a 200-tree forest has a million node
    entries): ``values`` is 1-D, of integers (INTS), floats (FLOATS) or bytes (STRINGS)."""
    kind = values.dtype.kind
    if values.ndim != 1 or kind not in _ARRAY_ATTRIBUTES or values.size == 0:
        raise ValueError(f"attribute {name!r}: expected a non-empty 1-D array of integers, "
                         f"floats or bytes, got dtype {values.dtype} and shape {values.shape}")
    field, kind_enum = _ARRAY_ATTRIBUTES[kind]
    attr.name, attr.type = name, kind_enum
    getattr(attr, field).extend(values.tolist())


def assemble(nodes: Iterable[onnx.NodeProto], initializers: Iterable[onnx.TensorProto],
             model_input: onnx.ValueInfoProto, outputs: Iterable[onnx.ValueInfoProto],
             opsets: Mapping[str, int]) -> onnx.ModelProto:
    """A checked one-input model of these parts at ``IR_VERSION``."""
    graph = helper.make_graph(list(nodes), GRAPH_NAME, [model_input], list(outputs),
                              initializer=list(initializers))
    model = helper.make_model(graph, producer_name=PRODUCER,
                              opset_imports=[helper.make_opsetid(d, v)
                                             for d, v in sorted(opsets.items())])
    return finish(model)


def finish(model: onnx.ModelProto) -> onnx.ModelProto:
    """Pin ``IR_VERSION``, merge duplicate opset imports (highest per domain), check."""
    versions: dict[str, int] = {}
    for op in model.opset_import:
        versions[op.domain] = max(versions.get(op.domain, 0), op.version)
    del model.opset_import[:]
    model.opset_import.extend(helper.make_opsetid(d, v) for d, v in sorted(versions.items()))
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model
