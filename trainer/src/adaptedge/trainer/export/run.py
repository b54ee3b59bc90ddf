"""Running an exported model with onnxruntime (one thread, CPU) on float32 rows.

For tests, evaluation and the HPC's own ONNX; the device runs models through ``edge``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import onnx

from adaptedge.protocol.onnx_contract import MODEL_INPUT, PROBA_OUTPUT


def _session(model: onnx.ModelProto | bytes) -> Any:
    import onnxruntime as ort

    data = model if isinstance(model, bytes) else model.SerializeToString()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def _rows(X: npt.ArrayLike) -> npt.NDArray[np.float32]:
    return np.ascontiguousarray(np.asarray(X, dtype=np.float32).reshape(np.shape(X)[0], -1))


def run_node(model: onnx.ModelProto | bytes, X: npt.ArrayLike) -> dict[str, npt.NDArray[np.float32]]:
    """Every output of ``model`` on rows ``X``, by name."""
    session = _session(model)
    names = [o.name for o in session.get_outputs()]
    values = session.run(names, {MODEL_INPUT: _rows(X)})
    return {name: np.asarray(v) for name, v in zip(names, values, strict=True)}


def run_onnx(model: onnx.ModelProto | bytes, X: npt.ArrayLike, output: str | None = None
             ) -> npt.NDArray[np.float32]:
    """One output of ``model`` on rows ``X`` (default ``probabilities``, else the first)."""
    session = _session(model)
    names = [o.name for o in session.get_outputs()]
    name = output or (PROBA_OUTPUT if PROBA_OUTPUT in names else names[0])
    result: npt.NDArray[np.float32] = np.asarray(session.run([name], {MODEL_INPUT: _rows(X)})[0],
                                                 dtype=np.float32)
    return result
