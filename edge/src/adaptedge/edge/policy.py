"""A bundle's policy graph compiled for the device: nodes with bound sessions, integer sensor ids.

The rules of the walk are in ``edge.walk`` (the sans-IO step); ``edge.runtime`` drives it.
``acquire`` and ``route`` compile to one kind, ``MOVE``: the manifest already checked that the
target holds this node's sensors, so a move reads the target's sensors not read yet, in its
listed order (none, one or several).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from adaptedge.edge.errors import BundleRefused
from adaptedge.edge.session import NodeSession
from adaptedge.protocol.costs import CostBreakdown, visit_costs
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.policy_graph import PolicyGraph

STOP = 0
MOVE = 1
ESCALATE = 2
_KIND_CODES = {"stop": STOP, "acquire": MOVE, "route": MOVE, "escalate": ESCALATE}


@dataclass(slots=True, eq=False)
class CompiledAction:
    kind: int
    next: CompiledNode | None = None
    """For a move: the node reached."""
    new_sensor_names: tuple[str, ...] = ()
    """For a move: the sensors entering ``next`` reads when every sensor of this node was read
    (always so on the replay path), in ``next``'s listed order."""


@dataclass(slots=True, eq=False)
class CompiledNode:
    id: str
    session: NodeSession
    inputs: npt.NDArray[np.intp]
    sensors: tuple[int, ...]
    """Sensor indices in the listed order (the order entering the node reads them)."""
    sensor_names: tuple[str, ...]
    sensor_bits: int
    actions: list[CompiledAction] = field(default_factory=list)
    single: bool = True
    """One action only: the walk takes it without looking at scores."""
    escalate: CompiledAction | None = None
    """The node's escalate action, if it has one."""
    all_inputs: bool = False
    """The model takes every feature column in order: the row is copied as is."""


@dataclass(slots=True, eq=False)
class CompiledPolicy:
    name: str
    root: CompiledNode
    nodes: dict[str, CompiledNode]
    visit_cost: dict[str, CostBreakdown] = field(default_factory=dict)
    """Node id -> what running its model costs per visit (``protocol.costs``; empty when no
    node has a ``compute`` cost)."""

    def visits_cost(self, node_ids: list[str]) -> CostBreakdown:
        """The evaluation cost of a walk that visited ``node_ids``."""
        total = CostBreakdown()
        for node_id in node_ids:
            cost = self.visit_cost.get(node_id)
            if cost is not None:
                total = total + cost
        return total

    def session_keys(self) -> set[tuple[str, int, int]]:
        return {(n.session.file, n.inputs.shape[0], len(n.actions)) for n in self.nodes.values()}


class ModelStore:
    """Sessions for a verified bundle, created on first use from hash-checked bytes.

    Each model file's bytes are checked against the manifest's SHA-256 right before its
    session is created, so a file changed after ``verify`` is refused too. Nodes sharing a
    model (same file and shape) share its session.
    """

    def __init__(self, manifest: Manifest, root: Path) -> None:
        self._manifest = manifest
        self._root = root
        self._sessions: dict[tuple[str, int, int], NodeSession] = {}

    def get(self, file: str, n_inputs: int, n_actions: int) -> NodeSession:
        key = (file, n_inputs, n_actions)
        session = self._sessions.get(key)
        if session is None:
            path = self._root / file
            try:
                model = path.read_bytes()
            except OSError as exc:
                raise BundleRefused(f"cannot be read ({exc})", path=str(path)) from exc
            if hashlib.sha256(model).hexdigest() != self._manifest.files[file]:
                raise BundleRefused("does not match its SHA-256 in the manifest: the bundle "
                                    "was modified after loading; reload a good copy",
                                    path=str(path))
            session = NodeSession(path, model, n_inputs, len(self._manifest.classes),
                                  n_actions)
            self._sessions[key] = session
        return session

    def keep_only(self, keys: set[tuple[str, int, int]]) -> None:
        """Drop every session not in ``keys``."""
        for key in list(self._sessions):
            if key not in keys:
                del self._sessions[key]

    @property
    def n_sessions(self) -> int:
        return len(self._sessions)


def compile_policy(manifest: Manifest, name: str, graph: PolicyGraph,
                   sessions: ModelStore) -> CompiledPolicy:
    index = {spec.name: i for i, spec in enumerate(manifest.sensors)}
    nodes: dict[str, CompiledNode] = {}
    for node_id, node in graph.nodes.items():
        ids = tuple(index[s] for s in node.sensors)
        nodes[node_id] = CompiledNode(
            id=node_id,
            session=sessions.get(node.model.file, len(node.model.inputs), len(node.actions)),
            inputs=np.asarray(node.model.inputs, dtype=np.intp),
            sensors=ids,
            sensor_names=node.sensors,
            sensor_bits=sum(1 << i for i in ids),
            all_inputs=node.model.inputs == tuple(range(len(manifest.feature_names))),
        )
    for node_id, node in graph.nodes.items():
        compiled = nodes[node_id]
        for action in node.actions:
            kind = _KIND_CODES[action.kind]
            if kind == MOVE:
                assert action.next is not None
                target = nodes[action.next]
                new = tuple(manifest.sensors[i].name for i in target.sensors
                            if not compiled.sensor_bits >> i & 1)
                compiled.actions.append(CompiledAction(kind, target, new))
            else:
                compiled.actions.append(CompiledAction(kind))
            if kind == ESCALATE and compiled.escalate is None:
                compiled.escalate = compiled.actions[-1]
        compiled.single = len(compiled.actions) == 1
    return CompiledPolicy(name=name, root=nodes[graph.root], nodes=nodes,
                          visit_cost=visit_costs(graph, manifest.cost_weights))

