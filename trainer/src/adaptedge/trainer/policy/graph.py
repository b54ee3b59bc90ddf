"""The one policy graph every training method builds, and the protocol of its node models.

A ``Graph`` is what a method hands to the walk (validation metrics) and to the exporter (the
bundle): nodes keyed by id, each with its sensors (names, in reading order), its model's
input columns, its actions and a ``NodeModel``. ADAPT-GBRT, ADAPT-LIN, L1, Greedy Miser and
the confidence cascade build one node; Graph-Reduce, the static skyline and the cascade
baseline build theirs from the sensor lattice. Actions follow ``protocol.manifest`` (and the
``route`` contract): ``stop``, ``acquire`` (one sensor; ``next`` holds exactly the union),
``route`` (``next`` holds a superset; entering it reads the difference) and ``escalate``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.policy_graph import Action, ComputeCost

FloatArray = NDArray[np.float64]
Kind = Literal["stop", "acquire", "route", "escalate"]


class NodeModel(Protocol):
    """What a node runs. ``X`` holds the node's input columns only (float32 values)."""

    def proba(self, X: NDArray[np.floating]) -> FloatArray:
        """[N, n_classes] float64 class probabilities (what ``stop`` answers with)."""
        ...

    def action_scores(self, X: NDArray[np.floating]) -> FloatArray | None:
        """[N, n_actions] float64 scores (``None`` for a one-action node). The walk takes the
        first action within the node's ``tie_band`` of the best score."""
        ...

    def to_onnx(self) -> bytes:
        """The node's ONNX model in the ``protocol.manifest`` model contract."""
        ...


@dataclass(frozen=True)
class Metrics:
    """Accuracy and mean costs of a policy on one split (cost = training scalar)."""

    accuracy: float
    cost: float
    escalation_rate: float = 0.0
    avg_sensors_read: float = 0.0


@dataclass(frozen=True)
class GraphAction:
    kind: Kind
    next: str | None = None
    """For ``acquire`` and ``route``: the node reached."""
    sensor: str | None = None
    """For ``acquire``: the one sensor read."""

    def to_manifest(self) -> Action:
        return Action(self.kind, self.sensor, self.next)


@dataclass(frozen=True)
class GraphNode:
    sensors: tuple[str, ...]
    inputs: tuple[int, ...]
    actions: tuple[GraphAction, ...]
    model: NodeModel
    tie_band: float = 0.0
    """Scores within this of the best count as tied; the first tied action is taken (the
    exported ``action_scores`` encode the same rule; 0: the first argmax)."""
    compute: ComputeCost | None = None
    """What one evaluation of the node's model costs (``protocol.costs.compute_cost``),
    charged on every visit; exported as the manifest node's ``compute``."""


@dataclass(frozen=True)
class Graph:
    name: str
    root: str
    nodes: Mapping[str, GraphNode]
    validation: Metrics = Metrics(0.0, 0.0)
    params: dict[str, float | str] = field(default_factory=dict)
    method: str = ""

    def __post_init__(self) -> None:
        if self.root not in self.nodes:
            raise ValueError(f"graph {self.name!r}: root {self.root!r} is not a node")
        for nid, node in self.nodes.items():
            for action in node.actions:
                if action.kind in ("acquire", "route") and action.next not in self.nodes:
                    raise ValueError(f"graph {self.name!r}: node {nid!r} {action.kind}s to "
                                     f"unknown node {action.next!r}")

    def topological_order(self) -> list[str]:
        """Reachable node ids, every node after all its reachable parents; refuses a cycle."""
        order: list[str] = []
        state: dict[str, int] = {}  # 1 = on the path, 2 = done
        stack: list[tuple[str, int]] = [(self.root, 0)]
        path: list[str] = []
        while stack:
            nid, i = stack.pop()
            if i == 0:
                if state.get(nid) == 2:
                    continue
                if state.get(nid) == 1:
                    cycle = [*path[path.index(nid):], nid]
                    raise ValueError(f"graph {self.name!r} has a cycle: {' -> '.join(cycle)}")
                state[nid] = 1
                path.append(nid)
            nexts = [a.next for a in self.nodes[nid].actions if a.next is not None]
            if i < len(nexts):
                stack.append((nid, i + 1))
                stack.append((nexts[i], 0))
            else:
                state[nid] = 2
                path.pop()
                order.append(nid)
        return order[::-1]

    def with_validation(self, validation: Metrics) -> Graph:
        return Graph(self.name, self.root, self.nodes, validation, dict(self.params),
                     self.method)
