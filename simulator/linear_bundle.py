"""A small bundle built without the trainer: least-squares linear models in hand-built ONNX.

One policy node holding the first ``n_sensors`` sensors of a dataset (actions stop /
escalate; a linear gate set to escalate about ``escalate`` of the test rows) and an HPC over
every sensor. It is what ``adaptedge demo`` falls back to when ``trainer.api`` is missing,
and what simulator tests use for an ``adaptedge edge run`` device (which replays built-in
datasets). Needs ``onnx`` (the ``train`` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol import (
    Action,
    HpcRef,
    Manifest,
    ModelRef,
    OperatingPoint,
    PolicyGraph,
    PolicyNode,
    write_bundle,
)
from adaptedge.protocol.manifest import ACTION_OUTPUT, MODEL_INPUT, PROBA_OUTPUT

IR_VERSION = 9
OPSET = 17
F32 = npt.NDArray[np.float32]


def linear_onnx(weights: F32, bias: F32, action_weights: F32 | None = None,
                action_bias: F32 | None = None) -> bytes:
    """ONNX: probabilities = softmax(x W + b) [, action_scores = x A + c]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    n_in, n_classes = weights.shape
    inits = [numpy_helper.from_array(weights.astype(np.float32), "W"),
             numpy_helper.from_array(bias.astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", [MODEL_INPUT, "W"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["logits"]),
             helper.make_node("Softmax", ["logits"], [PROBA_OUTPUT], axis=1)]
    outputs = [helper.make_tensor_value_info(PROBA_OUTPUT, TensorProto.FLOAT, ["N", n_classes])]
    if action_weights is not None and action_bias is not None:
        inits += [numpy_helper.from_array(action_weights.astype(np.float32), "A"),
                  numpy_helper.from_array(action_bias.astype(np.float32), "c")]
        nodes += [helper.make_node("MatMul", [MODEL_INPUT, "A"], ["xa"]),
                  helper.make_node("Add", ["xa", "c"], [ACTION_OUTPUT])]
        outputs.append(helper.make_tensor_value_info(
            ACTION_OUTPUT, TensorProto.FLOAT, ["N", action_weights.shape[1]]))
    graph = helper.make_graph(
        nodes, "linear",
        [helper.make_tensor_value_info(MODEL_INPUT, TensorProto.FLOAT, ["N", n_in])],
        outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def _fit(X: npt.NDArray[Any], y: npt.NDArray[Any], n_classes: int) -> tuple[F32, F32]:
    mean, std = X.mean(axis=0), X.std(axis=0) + 1e-6
    Z = np.hstack([(X - mean) / std, np.ones((len(X), 1))])
    T = np.eye(n_classes)[y] * 8.0 - 4.0
    coef, *_ = np.linalg.lstsq(Z, T, rcond=None)
    W = coef[:-1] / std[:, None]
    b = coef[-1] - (mean / std) @ coef[:-1]
    return W.astype(np.float32), b.astype(np.float32)


def build_linear_bundle(out: Path, data: str, *, n_sensors: int = 4, escalate: float = 0.3,
                        seed: int = 0) -> Manifest:
    """Write the bundle for built-in dataset ``data`` to ``out``; returns its manifest."""
    from adaptedge.trainer.datasets import load_dataset

    ds = load_dataset(data)
    k = len(ds.classes)
    node_sensors = ds.sensors[:n_sensors]
    cols = tuple(sorted(c for s in node_sensors for c in s.features))
    W_hpc, b_hpc = _fit(ds.X_train, ds.y_train, k)
    W, b = _fit(ds.X_train[:, cols], ds.y_train, k)
    rng = np.random.default_rng(seed)
    A = np.zeros((len(cols), 2), np.float32)
    A[:, 1] = rng.normal(size=len(cols)) / (ds.X_train[:, cols].std(0) + 1e-6)
    score = ds.X_val[:, cols] @ A[:, 1]
    c = np.asarray([0.0, -np.quantile(score, 1.0 - escalate)], np.float32)
    files = {"hpc.onnx": linear_onnx(W_hpc, b_hpc), "gate.onnx": linear_onnx(W, b, A, c)}
    node = PolicyNode(sensors=tuple(s.name for s in node_sensors),
                      model=ModelRef("gate.onnx", cols),
                      actions=(Action("stop"), Action("escalate")))
    manifest = Manifest(
        schema_version=1, bundle_id="pending", classes=ds.classes,
        feature_names=ds.feature_names, sensors=ds.sensors, link=ds.link,
        cost_weights=ds.cost_weights,
        hpc=HpcRef("hpc.onnx", tuple(s.name for s in ds.sensors), accuracy=0.0,
                   description="least-squares linear HPC (simulator.linear_bundle)"),
        policies={"gate": PolicyGraph(root="n0", nodes={"n0": node})},
        operating_points=(OperatingPoint("gate", "gate", accuracy=0.0, cost=0.0,
                                         escalation_rate=escalate),),
        default_operating_point="gate", files={},
        metadata={"method": "linear-least-squares", "dataset": data})
    return write_bundle(out, manifest, files)
