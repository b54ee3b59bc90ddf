"""A bundle's policy graph compiled for the device: ``protocol.walk``'s compiled graph with
each node's model bound to its onnxruntime session (``edge.session``), plus the nodes' visit
costs. The rules of the walk are ``protocol.walk``'s; ``edge.runtime`` drives it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from adaptedge.edge.errors import BundleRefused
from adaptedge.edge.session import NodeSession
from adaptedge.protocol.action_head import ActionHead
from adaptedge.protocol.costs import CostBreakdown, visit_costs
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import PROBA_OUTPUT, VALUE_OUTPUT, Manifest
from adaptedge.protocol.model_file import model_bytes
from adaptedge.protocol.policy_graph import PolicyGraph, PolicyNode
from adaptedge.protocol.walk import WalkGraph, WalkNode, compile_graph

CompiledNode = WalkNode[NodeSession]
"""A node of a compiled policy: ``model`` is its session."""


@dataclass(slots=True, eq=False)
class CompiledPolicy:
    name: str
    graph: WalkGraph[NodeSession]
    visit_cost: dict[str, CostBreakdown] = field(default_factory=dict)
    """Node id -> what running its model costs per visit (``protocol.costs``; empty when no
    node has a ``compute`` cost)."""

    @property
    def root(self) -> CompiledNode:
        return self.graph.root

    def visits_cost(self, node_ids: list[str]) -> CostBreakdown:
        """The evaluation cost of a walk that visited ``node_ids``."""
        total = CostBreakdown()
        for node_id in node_ids:
            cost = self.visit_cost.get(node_id)
            if cost is not None:
                total = total + cost
        return total

    def session_keys(self) -> set[SessionKey]:
        return {session_key(n.model.file, n.inputs.shape[0], len(n.actions), n.head)
                for n in self.graph.nodes.values()}


SessionKey = tuple[str, int, int, int]
"""(file, inputs, actions, action basis width or 0): nodes with equal keys share a session."""


def session_key(file: str, n_inputs: int, n_actions: int, head: ActionHead | None
                ) -> SessionKey:
    return (file, n_inputs, n_actions, 0 if head is None or n_actions < 2
            else head.basis_width)


class ModelStore:
    """Sessions for a verified bundle, created on first use from hash-checked bytes (a
    regression bundle's nodes answer their ``value``, one column).

    Each model file's bytes are checked against the manifest's SHA-256 right before its
    session is created, so a file changed after ``verify`` is refused too. Nodes sharing a
    model (same file and shape) share its session.
    """

    def __init__(self, manifest: Manifest, root: Path) -> None:
        self._manifest = manifest
        self._root = root
        self._sessions: dict[SessionKey, NodeSession] = {}
        regression = manifest.is_regression
        self._answer = ((1, VALUE_OUTPUT) if regression
                        else (len(manifest.classes), PROBA_OUTPUT))

    def get(self, key: SessionKey) -> NodeSession:
        file, n_inputs, n_actions, basis_width = key
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
            width, output = self._answer
            try:
                model = model_bytes(file, model)  # checked above, then decompressed
            except BundleError as exc:
                raise BundleRefused(exc.message, path=str(path)) from exc
            session = NodeSession(path, model, n_inputs, width, n_actions, output,
                                  basis_width)
            self._sessions[key] = session
        return session

    def keep_only(self, keys: set[SessionKey]) -> None:
        """Drop every session not in ``keys``."""
        for key in list(self._sessions):
            if key not in keys:
                del self._sessions[key]

    @property
    def n_sessions(self) -> int:
        return len(self._sessions)


def compile_policy(manifest: Manifest, name: str, graph: PolicyGraph,
                   sessions: ModelStore) -> CompiledPolicy:
    def bind(node_id: str, node: PolicyNode) -> NodeSession:
        return sessions.get(session_key(node.model.file, len(node.model.inputs),
                                        len(node.actions), node.model.action_head))

    compiled = compile_graph(graph, [s.name for s in manifest.sensors],
                             len(manifest.feature_names), bind)
    return CompiledPolicy(name=name, graph=compiled,
                          visit_cost=visit_costs(graph, manifest.cost_weights))
