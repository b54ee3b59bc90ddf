"""One onnxruntime session per node model, its input and outputs bound once and reused.

The hot path writes the node's feature columns into ``x_row`` (a view of the bound float32
input), calls ``run()`` and reads ``proba_row`` / ``scores_row`` (views of the bound outputs;
a regression node's ``value`` [1, 1] is bound as ``proba_row``, one element).
No per-call allocation beyond what onnxruntime does itself (TOOLCHAIN.md: pre-bound IOBinding
is the cheapest way to call a small model from Python).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from adaptedge.edge.errors import BundleRefused
from adaptedge.protocol.action_head import BASIS_OUTPUT
from adaptedge.protocol.manifest import ACTION_OUTPUT, MODEL_INPUT, PROBA_OUTPUT

F32 = npt.NDArray[np.float32]


def session_options() -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    # No per-session arena: same speed for single rows, ~40 KiB less resident per session.
    options.enable_cpu_mem_arena = False
    return options


class NodeSession:
    """A node model (``x`` -> ``probabilities`` or, regression, ``value`` [,
    ``action_scores`` or ``action_basis``]) ready to run on one row."""

    __slots__ = ("_binding", "_keep", "_run", "_run_options", "file", "proba_row",
                 "scores_row", "x_row")

    def __init__(self, path: Path, model: bytes, n_inputs: int, n_classes: int,
                 n_actions: int, output: str = PROBA_OUTPUT, basis_width: int = 0) -> None:
        """``model`` holds the bytes of ``path`` (already checked against its hash);
        ``output``: the answer's tensor (``VALUE_OUTPUT`` with ``n_classes`` 1 for a
        regression node); ``basis_width`` > 0: the node has an action head, so
        ``scores_row`` holds the model's ``action_basis`` (that wide), not its scores."""
        self.file = path.name
        try:
            session = ort.InferenceSession(model, session_options(),
                                           providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own unrelated types
            raise BundleRefused(f"onnxruntime cannot load this model: {exc}",
                                path=str(path)) from exc
        scores_output = BASIS_OUTPUT if basis_width else ACTION_OUTPUT
        _check_contract(session, path, n_actions > 1, output, scores_output)
        x = np.zeros((1, n_inputs), dtype=np.float32)
        proba = np.zeros((1, n_classes), dtype=np.float32)
        scores = np.zeros((1, basis_width or max(n_actions, 1)), dtype=np.float32)
        binding = session.io_binding()
        values = [ort.OrtValue.ortvalue_from_numpy(a) for a in (x, proba, scores)]
        binding.bind_ortvalue_input(MODEL_INPUT, values[0])
        binding.bind_ortvalue_output(output, values[1])
        if n_actions > 1:
            binding.bind_ortvalue_output(scores_output, values[2])
        self._binding = binding
        self._run_options = ort.RunOptions()
        # The public wrapper adds ~30 µs of graph-capture bookkeeping per call when given
        # RunOptions; the C session's method is the same call without it.
        raw_session = getattr(session, "_sess", None)
        raw_binding = getattr(binding, "_iobinding", None)
        if raw_session is not None and raw_binding is not None:
            self._run: Callable[..., Any] = raw_session.run_with_iobinding
            self._binding = raw_binding
        else:  # pragma: no cover - other onnxruntime layouts
            self._run = session.run_with_iobinding
        self._keep = (session, binding, values, x, proba, scores)
        self.x_row: F32 = x[0]
        self.proba_row: F32 = proba[0]
        self.scores_row: F32 = scores[0]
        try:
            self.run()
        except Exception as exc:
            answers = (f"{n_classes} classes" if output == PROBA_OUTPUT
                       else f"a {output!r} [N, {n_classes}] output")
            scored = (f"an action basis of {basis_width}" if basis_width
                      else f"{n_actions} actions")
            raise BundleRefused(
                f"does not follow the model contract for {n_inputs} inputs, {answers}"
                f" and {scored}: {exc}", path=str(path)) from exc

    def run(self) -> None:
        """Run the model on ``x_row``; results land in ``proba_row`` and ``scores_row``."""
        self._run(self._binding, self._run_options)


def _check_contract(session: ort.InferenceSession, path: Path, needs_scores: bool,
                    output: str = PROBA_OUTPUT, scores_output: str = ACTION_OUTPUT) -> None:
    inputs = [i.name for i in session.get_inputs()]
    outputs = {o.name for o in session.get_outputs()}
    if inputs != [MODEL_INPUT]:
        raise BundleRefused(f"model inputs are {inputs}; the contract is one float32 input "
                            f"{MODEL_INPUT!r}", path=str(path))
    missing = {output} | ({scores_output} if needs_scores else set())
    missing -= outputs
    if missing:
        raise BundleRefused(f"model lacks output(s) {sorted(missing)} (it has {sorted(outputs)})",
                            path=str(path))
