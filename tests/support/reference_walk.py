"""The one independent reference walk over an exported bundle: the policy rules written plainly
with ``onnxruntime.InferenceSession.run``, sharing no code with the edge runtime or
``trainer.policy_eval``, so both can be checked against it row by row."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from adaptedge.protocol.costs import CostBreakdown, decision_cost
from adaptedge.protocol.manifest import Manifest


class WalkStep(TypedDict):
    """Where one row's walk ended."""

    label_index: int
    """The last node's own answer."""
    answer: int
    """The final answer: the HPC's when escalated, else ``label_index``."""
    nodes: tuple[str, ...]
    sensors_read: tuple[str, ...]
    """In reading order; an escalation adds the HPC's sensors."""
    escalated: bool
    probabilities: npt.NDArray[np.float32]
    """The last node's."""


class ReferenceWalk:
    """Walks one row through a policy graph; sessions open on first use."""

    def __init__(self, bundle: Path, manifest: Manifest) -> None:
        self.bundle = bundle
        self.manifest = manifest
        self._sessions: dict[str, ort.InferenceSession] = {}

    def session(self, name: str) -> ort.InferenceSession:
        if name not in self._sessions:
            self._sessions[name] = ort.InferenceSession(
                str(self.bundle / name), providers=["CPUExecutionProvider"])
        return self._sessions[name]

    def run(self, name: str, cols: tuple[int, ...],
            row: npt.NDArray[np.float32]) -> list[npt.NDArray[np.float32]]:
        """[probabilities, action_scores (when the model has them)] for one row."""
        x = np.asarray(row)[list(cols)].reshape(1, -1).astype(np.float32)
        session = self.session(name)
        present = {o.name for o in session.get_outputs()}
        wanted = [n for n in ("probabilities", "action_scores") if n in present]
        return [np.asarray(o)[0] for o in session.run(wanted, {"x": x})]

    def walk(self, policy: str, row: npt.NDArray[np.float32]) -> WalkStep:
        """One row from the root to a stop or an escalation. Any action with a ``next`` node
        (``acquire``, or a ``route`` reading zero or more sensors) moves there and reads the
        sensors that node holds and the walk has not read yet."""
        graph = self.manifest.policies[policy]
        node_id = graph.root
        read: list[str] = []
        nodes: list[str] = []
        while True:
            node = graph.nodes[node_id]
            read += [s for s in node.sensors if s not in read]
            nodes.append(node_id)
            outputs = self.run(node.model.file, node.model.inputs, row)
            action = node.actions[0] if len(node.actions) == 1 else \
                node.actions[int(np.argmax(outputs[1]))]
            if action.next is not None:
                node_id = action.next
                continue
            escalated = action.kind == "escalate"
            local = int(np.argmax(outputs[0]))
            answer = local
            if escalated:
                read += [s for s in self.manifest.hpc.sensors if s not in read]
                answer = int(np.argmax(self.hpc(row)))
            return {"label_index": local, "answer": answer, "nodes": tuple(nodes),
                    "sensors_read": tuple(read), "escalated": escalated,
                    "probabilities": outputs[0]}

    def hpc(self, row: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        cols = tuple(range(len(self.manifest.feature_names)))
        return self.run(self.manifest.hpc.file, cols, row)[0]

    def cost(self, sensors: tuple[str, ...], escalated: bool) -> CostBreakdown:
        return decision_cost(self.manifest, sensors, escalated)
