"""A node model given as ONNX bytes: hand-built graphs, tests, models made elsewhere.

Its float64 outputs are onnxruntime's float32 ones, widened; it exports its bytes unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.manifest import ACTION_OUTPUT, PROBA_OUTPUT
from adaptedge.trainer.export.run import run_node
from adaptedge.trainer.policy.graph import FloatArray


@dataclass(frozen=True)
class OnnxNodeModel:
    onnx_model: bytes

    def proba(self, X: NDArray[np.floating]) -> FloatArray:
        return run_node(self.onnx_model, X)[PROBA_OUTPUT].astype(np.float64)

    def action_scores(self, X: NDArray[np.floating]) -> FloatArray | None:
        out = run_node(self.onnx_model, X)
        return out[ACTION_OUTPUT].astype(np.float64) if ACTION_OUTPUT in out else None

    def to_onnx(self) -> bytes:
        return self.onnx_model
