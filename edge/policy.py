"""A bundle's policy graph compiled for the device: nodes with bound sessions, integer sensor ids.

The walk itself lives in ``edge.runtime``; this module fixes the rules it follows. Start at the
root; entering a node reads its sensors not read yet, in listed order; run the node model once;
take the first highest ``action_scores`` entry (a node with one action needs none): ``stop``
answers with the first argmax of ``probabilities``, ``acquire`` moves to the next node,
``escalate`` reads the HPC's unread sensors and asks the cloud. When entering a node fails
(a sensor fault) the walk stays where it is and takes the next-best action still possible.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from adaptedge.edge.errors import BundleRefused
from adaptedge.edge.session import NodeSession
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.policy_graph import PolicyGraph

STOP = 0
ACQUIRE = 1
ESCALATE = 2
_KIND_CODES = {"stop": STOP, "acquire": ACQUIRE, "escalate": ESCALATE}


@dataclass(slots=True, eq=False)
class CompiledAction:
    kind: int
    sensor: int = -1
    """For acquire: the sensor (index into ``manifest.sensors``) named by the action."""
    next: CompiledNode | None = None
    new_sensors: tuple[int, ...] = ()
    """For acquire: the sensors entering ``next`` reads when every sensor of this node was read
    (the replay path), in ``next``'s listed order."""


@dataclass(slots=True, eq=False)
class CompiledNode:
    id: str
    session: NodeSession
    inputs: npt.NDArray[np.intp]
    sensors: tuple[int, ...]
    """Sensor indices in the listed order (the order entering the node reads them)."""
    sensor_bits: int
    actions: list[CompiledAction] = field(default_factory=list)
    single: bool = True
    """One action only: the walk takes it without looking at scores."""

    def ranked_actions(self) -> list[int]:
        """Action indices best first; ties keep listed order (the first highest wins)."""
        if len(self.actions) == 1:
            return [0]
        order = np.argsort(-self.session.scores_row.astype(np.float64), kind="stable")
        return [int(i) for i in order]


@dataclass(slots=True, eq=False)
class CompiledPolicy:
    name: str
    root: CompiledNode
    nodes: dict[str, CompiledNode]

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
            sensor_bits=sum(1 << i for i in ids),
        )
    for node_id, node in graph.nodes.items():
        compiled = nodes[node_id]
        for action in node.actions:
            kind = _KIND_CODES[action.kind]
            if kind == ACQUIRE:
                assert action.sensor is not None and action.next is not None
                target = nodes[action.next]
                new = tuple(i for i in target.sensors if not compiled.sensor_bits >> i & 1)
                compiled.actions.append(
                    CompiledAction(kind, index[action.sensor], target, new))
            else:
                compiled.actions.append(CompiledAction(kind))
        compiled.single = len(compiled.actions) == 1
    return CompiledPolicy(name=name, root=nodes[graph.root], nodes=nodes)

