"""A hand-built policy graph and numpy node models for the walk's own tests (no ONNX)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.policy_graph import (
    Action,
    ComputeCost,
    ModelRef,
    PolicyGraph,
    PolicyNode,
)
from adaptedge.protocol.walk import WalkGraph, compile_graph

F64 = npt.NDArray[np.float64]
SENSORS = ("a", "b", "c", "d")
"""One feature column each, in this order."""
GRAPH = PolicyGraph(root="r", nodes={
    "r": PolicyNode(("a",), ModelRef("r", (0,)),
                    (Action("stop"), Action("route", next="ab"), Action("acquire", "c", "ac"),
                     Action("route", next="all"), Action("escalate")),
                    compute=ComputeCost(energy_mj=1.0)),
    "ab": PolicyNode(("b", "a"), ModelRef("ab", (1, 0)),
                     (Action("stop"), Action("route", next="all"), Action("escalate"))),
    "ac": PolicyNode(("a", "c"), ModelRef("ac", (2, 0)),
                     (Action("stop"), Action("route", next="all")),
                     compute=ComputeCost(energy_mj=4.0)),
    "all": PolicyNode(("a", "d", "c", "b"), ModelRef("all", (0, 3, 2, 1)), (Action("stop"),)),
})


class Linear:
    """Per node: probabilities softmax(x W), and action scores peaking each at its own value of
    the first input (so rows take every action of a node)."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.weights = {nid: (rng.normal(size=(len(node.model.inputs), 2)),
                              rng.permutation(np.linspace(-1.5, 1.5, len(node.actions))))
                        for nid, node in GRAPH.nodes.items()}

    def outputs(self, node_id: str, x: F64) -> tuple[F64, F64]:
        W, centers = self.weights[node_id]
        z = x @ W
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True), -(x[:, :1] - centers[None, :]) ** 2


def compiled() -> WalkGraph[str]:
    return compile_graph(GRAPH, SENSORS, len(SENSORS), lambda node_id, _: node_id)
