"""The one linear builder: ``output = source @ W + b`` with float32 constants.

Zero inputs (``W`` of shape [0, k]) are allowed: a constant model for a root node.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import onnx

from adaptedge.protocol.onnx_contract import MODEL_INPUT
from adaptedge.trainer.export.graph import GraphBuilder


def linear(b: GraphBuilder, weights: npt.ArrayLike, bias: npt.ArrayLike, *,
           source: str = MODEL_INPUT, output: str, name: str = "") -> int:
    """Append ``output = source @ weights + bias`` (weights [n_in, n_out], float32 constants
    ``{name}W`` and ``{name}b``); returns n_out."""
    W = np.asarray(weights, dtype=np.float32)
    if W.ndim != 2:
        raise ValueError(f"linear weights must be 2-D [n_inputs, n_outputs], got shape {W.shape}")
    bias32 = np.asarray(bias, dtype=np.float32).reshape(W.shape[1])
    b.add("MatMul", [source, b.const(f"{name}W", W)], [f"{name}xw"])
    b.add("Add", [f"{name}xw", b.const(f"{name}b", bias32)], [output])
    return int(W.shape[1])


def linear_core(weights: npt.ArrayLike, bias: npt.ArrayLike
                ) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """The nodes and constants of ``core = x @ weights + bias`` (a node model's core)."""
    W = np.asarray(weights)
    b = GraphBuilder(W.shape[0])
    linear(b, W, bias, output="core")
    return b.nodes, b.initializers
