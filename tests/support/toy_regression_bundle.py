"""A small hand-made regression bundle for tests: linear ONNX graphs built with ``onnx.helper``
(numpy and onnx only, no scikit-learn, no trainer), so the edge and cloud tests of the
regression contract need nothing the trainer writes.

Three features from two sensors (a: columns 0, 1; b: column 2). Every model is linear:
``value = x w + c`` [N, 1] and ``action_scores = x A + d``, so a test chooses a row's walk and
its answers by its values (``node_value``, ``hpc_value`` give the exact float32 answers):

- ``walk`` (the default): root ``a`` reads a; scores [a0, a1, -a0 - a1 - 1]: it stops when
  a0 is the highest, acquires b (node ``ab``) when a1 is, escalates when both are well below zero (a0 = a1 = -1: scores [-1, -1, 1]);
  ``ab`` scores [b0, -b0]: stops when b0 >= 0, else escalates.
- ``gate``: one node ``ab`` reading a and b, scores [b0, -b0] as above.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from adaptedge.protocol import (
    Action,
    CostWeights,
    HpcRef,
    LinkSpec,
    Manifest,
    ModelRef,
    OperatingPoint,
    PolicyGraph,
    PolicyNode,
    SensorSpec,
    write_bundle,
)
from adaptedge.protocol.manifest import (
    ACTION_OUTPUT,
    MODEL_INPUT,
    REGRESSION_SCHEMA_VERSION,
    VALUE_OUTPUT,
)
from adaptedge.protocol.onnx_contract import IR_VERSION, OPSET

F32 = npt.NDArray[np.float32]

VALUE_WEIGHTS: dict[str, tuple[list[float], float]] = {
    "hpc.onnx": ([1.0, 2.0, 3.0], 0.5),
    "a.onnx": ([1.5, -0.5], 0.25),
    "ab.onnx": ([0.5, 1.0, -2.0], -1.0),
}
"""Model file -> (value weights over its inputs, intercept)."""
ACTIONS: dict[str, tuple[list[list[float]], list[float]]] = {
    "a.onnx": ([[1.0, 0.0, -1.0], [0.0, 1.0, -1.0]], [0.0, 0.0, -1.0]),
    "ab.onnx": ([[0.0, 0.0], [0.0, 0.0], [1.0, -1.0]], [0.0, 0.0]),
}


def linear_value_model(weights: list[float], bias: float,
                       action_weights: list[list[float]] | None = None,
                       action_bias: list[float] | None = None, *,
                       output: str = VALUE_OUTPUT, unary: str | None = None) -> bytes:
    """ONNX: ``output`` = x w + c [N, 1] [, ``action_scores`` = x A + d]; ``unary``: an ONNX
    op applied last (e.g. "Sqrt": NaN where x w + c < 0, a hostile HPC)."""
    n = len(weights)
    inits = [numpy_helper.from_array(np.asarray(weights, np.float32).reshape(n, 1), "w"),
             numpy_helper.from_array(np.asarray([bias], np.float32), "c")]
    nodes = [helper.make_node("MatMul", [MODEL_INPUT, "w"], ["xw"]),
             helper.make_node("Add", ["xw", "c"], ["raw" if unary else output])]
    if unary:
        nodes.append(helper.make_node(unary, ["raw"], [output]))
    outputs = [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["N", 1])]
    if action_weights is not None and action_bias is not None:
        k = len(action_bias)
        inits += [numpy_helper.from_array(np.asarray(action_weights, np.float32), "A"),
                  numpy_helper.from_array(np.asarray(action_bias, np.float32), "d")]
        nodes += [helper.make_node("MatMul", [MODEL_INPUT, "A"], ["xa"]),
                  helper.make_node("Add", ["xa", "d"], [ACTION_OUTPUT])]
        outputs.append(helper.make_tensor_value_info(ACTION_OUTPUT, TensorProto.FLOAT,
                                                     ["N", k]))
    graph = helper.make_graph(
        nodes, "toy_regression",
        [helper.make_tensor_value_info(MODEL_INPUT, TensorProto.FLOAT, ["N", n])], outputs,
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model.SerializeToString()


def node_value(file: str, x: npt.ArrayLike) -> float:
    """The float32 value model ``file`` answers for its input row ``x`` (as onnxruntime does:
    a float32 dot product; equal to the model's output up to float32 rounding order)."""
    w, c = VALUE_WEIGHTS[file]
    row = np.asarray(x, np.float32).reshape(1, -1)
    return float((row @ np.asarray(w, np.float32).reshape(-1, 1) + np.float32(c))[0, 0])


def hpc_value(x: npt.ArrayLike) -> float:
    return node_value("hpc.onnx", x)


def toy_regression_manifest(**changes: object) -> Manifest:
    """The toy regression manifest before writing (files empty, bundle id pending)."""
    gate = PolicyGraph(root="ab", nodes={
        "ab": PolicyNode(sensors=("a", "b"), model=ModelRef("ab.onnx", (0, 1, 2)),
                         actions=(Action("stop"), Action("escalate")))})
    walk = PolicyGraph(root="a", nodes={
        "a": PolicyNode(sensors=("a",), model=ModelRef("a.onnx", (0, 1)),
                        actions=(Action("stop"), Action("acquire", "b", "ab"),
                                 Action("escalate"))),
        "ab": PolicyNode(sensors=("a", "b"), model=ModelRef("ab.onnx", (0, 1, 2)),
                         actions=(Action("stop"), Action("escalate")))})
    fields: dict[str, object] = dict(
        schema_version=REGRESSION_SCHEMA_VERSION, bundle_id="pending", classes=(),
        feature_names=("a0", "a1", "b0"),
        sensors=(SensorSpec("a", (0, 1), energy_mj=2.0, latency_ms=5.0),
                 SensorSpec("b", (2,), energy_mj=10.0, latency_ms=20.0)),
        link=LinkSpec(), cost_weights=CostWeights(),
        hpc=HpcRef("hpc.onnx", ("a", "b"), accuracy=-0.5, description="toy linear HPC",
                   mse=0.5, mae=0.6),
        policies={"gate": gate, "walk": walk},
        operating_points=(
            OperatingPoint("gate", "gate", accuracy=-0.75, cost=12.0, escalation_rate=0.5,
                           mse=0.75, mae=0.7, paired_lower_bound=-0.4),
            OperatingPoint("walk", "walk", accuracy=-1.25, cost=8.0, escalation_rate=0.2,
                           avg_sensors_read=1.5, mse=1.25, mae=0.9),
        ),
        default_operating_point="walk", files={}, metadata={"method": "toy"},
        task="regression", target="temperature", target_unit="degC")
    fields.update(changes)
    return Manifest(**fields)  # type: ignore[arg-type]


def toy_regression_files() -> dict[str, bytes]:
    files = {"hpc.onnx": linear_value_model(*VALUE_WEIGHTS["hpc.onnx"])}
    for name in ("a.onnx", "ab.onnx"):
        files[name] = linear_value_model(*VALUE_WEIGHTS[name], *ACTIONS[name])
    return files


def build_toy_regression_bundle(out: Path, *, force: bool = False, hpc: bytes | None = None,
                                **changes: object) -> Manifest:
    """Write the toy regression bundle to ``out``; ``hpc``: other bytes for ``hpc.onnx``;
    ``changes``: manifest fields to replace (e.g. ``link``)."""
    files = toy_regression_files()
    if hpc is not None:
        files["hpc.onnx"] = hpc
    return write_bundle(out, toy_regression_manifest(**changes), files, force=force)
