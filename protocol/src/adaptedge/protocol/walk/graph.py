"""A policy graph compiled for walking: integer sensor ids, actions linked to their nodes, and
each node's model handle (an onnxruntime session, a model file name, a trainer model).

``acquire`` and ``route`` compile to one kind, ``MOVE``: the manifest already checked that the
target holds the node's sensors, so a move reads the target's sensors not read yet, in its
listed order (none, one or several).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.action_head import ActionHead, row_scorer
from adaptedge.protocol.policy_graph import PolicyGraph, PolicyNode, topological_order

STOP = 0
MOVE = 1
ESCALATE = 2
KIND_CODES = {"stop": STOP, "acquire": MOVE, "route": MOVE, "escalate": ESCALATE}

M = TypeVar("M")


@dataclass(slots=True, eq=False)
class WalkAction(Generic[M]):
    kind: int
    """``STOP``, ``MOVE`` or ``ESCALATE``."""
    next: WalkNode[M] | None = None
    """For a move: the node reached."""
    new_sensors: tuple[int, ...] = ()
    """For a move: the sensors entering ``next`` reads when every sensor of this node was read
    (always so when no read fails), in ``next``'s listed order."""
    new_sensor_names: tuple[str, ...] = ()
    """``new_sensors`` by name."""


@dataclass(slots=True, eq=False)
class WalkNode(Generic[M]):
    id: str
    model: M
    inputs: npt.NDArray[np.intp]
    """The model's feature columns."""
    sensors: tuple[int, ...]
    """Sensor indices in the listed order (the order entering the node reads them)."""
    sensor_names: tuple[str, ...]
    sensor_bits: int
    actions: list[WalkAction[M]] = field(default_factory=list)
    single: bool = True
    """One action only: the walk takes it without looking at scores."""
    escalate: WalkAction[M] | None = None
    """The node's first escalate action, if it has one."""
    all_inputs: bool = False
    """The model takes every feature column in order: a row is its input as is."""
    tie_band: float = 0.0
    """Scores within this of the best count as tied (0: the first highest; exported models
    encode their band in ``action_scores``)."""
    head: ActionHead | None = None
    """The model's action head (``protocol.action_head``): the model then outputs
    ``action_basis`` and the node's scores are ``apply_head(head, basis)``."""
    head_row: Callable[[npt.NDArray[np.float32]], npt.NDArray[np.float32]] | None = None
    """``apply_head`` of ``head`` on one basis row, its arrays bound (``row_scorer``)."""


@dataclass(frozen=True, slots=True, eq=False)
class WalkGraph(Generic[M]):
    root: WalkNode[M]
    nodes: dict[str, WalkNode[M]]
    order: tuple[str, ...]
    """Node ids such that every move goes to a later node (what the batched walk follows)."""


def compile_graph(graph: PolicyGraph, sensor_names: Sequence[str], n_features: int,
                  bind: Callable[[str, PolicyNode], M], *, order: Sequence[str] | None = None,
                  tie_band: Mapping[str, float] | None = None) -> WalkGraph[M]:
    """``graph`` (checked: ``policy_graph.check_graph``) over the sensors ``sensor_names``,
    each node's model ``bind(node_id, node)``; ``order`` (default
    ``policy_graph.topological_order``) may leave out nodes the root cannot reach."""
    index = {name: i for i, name in enumerate(sensor_names)}
    every_column = tuple(range(n_features))
    bands = tie_band or {}
    nodes: dict[str, WalkNode[M]] = {}
    for node_id, node in graph.nodes.items():
        ids = tuple(index[s] for s in node.sensors)
        nodes[node_id] = WalkNode(
            id=node_id, model=bind(node_id, node),
            inputs=np.asarray(node.model.inputs, dtype=np.intp), sensors=ids,
            sensor_names=tuple(node.sensors), sensor_bits=sum(1 << i for i in ids),
            all_inputs=tuple(node.model.inputs) == every_column,
            tie_band=float(bands.get(node_id, 0.0)), head=node.model.action_head,
            head_row=None if node.model.action_head is None
            else row_scorer(node.model.action_head))
    for node_id, node in graph.nodes.items():
        compiled = nodes[node_id]
        for action in node.actions:
            kind = KIND_CODES[action.kind]
            if kind == MOVE:
                assert action.next is not None
                target = nodes[action.next]
                new = tuple(i for i in target.sensors if not compiled.sensor_bits >> i & 1)
                compiled.actions.append(WalkAction(kind, target, new,
                                                   tuple(sensor_names[i] for i in new)))
            else:
                compiled.actions.append(WalkAction(kind))
            if kind == ESCALATE and compiled.escalate is None:
                compiled.escalate = compiled.actions[-1]
        compiled.single = len(compiled.actions) == 1
    walk_order = tuple(topological_order(graph) if order is None else order)
    return WalkGraph(root=nodes[graph.root], nodes=nodes, order=walk_order)
