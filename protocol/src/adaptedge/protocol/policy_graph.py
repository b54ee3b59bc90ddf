"""The policy graph of a bundle: nodes with ids, their models and actions, and its rules.

A node names the sensors acquired on the way to it. Actions: ``stop`` (answer with the node's
classifier), ``escalate`` (ask the cloud HPC), ``acquire`` (read one more sensor: the next node
holds exactly this node's sensors plus it) and ``route`` (move to a node whose sensors contain
this node's, reading the difference: none, one or several). Entering a node reads its sensors
not read yet, in listed order. Since a route may keep the sensor set, sensor sets alone do not
order the nodes: ``check_graph`` refuses a cycle explicitly.

``read_graph`` reads one graph from the manifest's JSON and ``check_graph`` validates a typed
graph against the bundle's sensors and files (anyone building a graph may call it before
exporting one).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from adaptedge.protocol.action_head import ActionHead, read_head
from adaptedge.protocol.errors import BundleError

ActionKind = Literal["stop", "acquire", "route", "escalate"]
ACTION_KINDS: tuple[ActionKind, ...] = ("stop", "acquire", "route", "escalate")
MOVE_KINDS: frozenset[str] = frozenset({"acquire", "route"})
"""Actions that move the walk to another node (``Action.next``)."""


@dataclass(frozen=True, slots=True)
class ModelRef:
    """An ONNX file and the feature columns (indices into ``feature_names``) it takes as ``x``."""

    file: str
    inputs: tuple[int, ...]
    action_head: ActionHead | None = None
    """Optional (``protocol.action_head``): the model outputs ``action_basis`` and this head
    turns it into the node's action scores; None: the model outputs ``action_scores``."""


@dataclass(frozen=True, slots=True)
class Action:
    kind: ActionKind
    sensor: str | None = None
    """For ``acquire``: the sensor to read next (``route`` names none: the target's set says)."""
    next: str | None = None
    """For ``acquire`` and ``route``: the node reached."""


@dataclass(frozen=True, slots=True)
class ComputeCost:
    """What one evaluation of a node's model costs, in the units a sensor read is priced in.

    Charged once per visit of the node (every visit runs its model). ``units`` counts like
    features under ``CostWeights.uniform`` (e.g. 0.01 per tree: a tree evaluation priced at
    1% of one feature read). Nodes without one (``None``) cost nothing to evaluate."""

    energy_mj: float = 0.0
    latency_ms: float = 0.0
    units: float = 0.0


@dataclass(frozen=True, slots=True)
class PolicyNode:
    """A set of acquired sensors, the local classifier there, and the actions allowed."""

    sensors: tuple[str, ...]
    model: ModelRef
    actions: tuple[Action, ...]
    compute: ComputeCost | None = None
    """Evaluation cost of the node's model (optional; absent from bundles that have none)."""


@dataclass(frozen=True, slots=True)
class PolicyGraph:
    """A DAG of nodes. Entering a node reads its sensors not read yet, in listed order."""

    root: str
    nodes: Mapping[str, PolicyNode]


class FieldReader(Protocol):
    """What ``read_graph`` needs of the manifest's JSON reader: typed fields that raise a
    ``BundleError`` naming the dotted path of whatever is wrong."""

    raw: Any
    path: str

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any: ...
    def text(self, key: str) -> str: ...
    def strings(self, key: str) -> tuple[str, ...]: ...
    def ints(self, key: str) -> tuple[int, ...]: ...
    def child(self, key: str) -> FieldReader: ...
    def objects(self, key: str) -> Sequence[FieldReader]: ...


def read_graph(r: FieldReader, *, name: str, sensor_names: Collection[str],
               owner: Mapping[int, str], files: Collection[str]) -> PolicyGraph:
    """Read policy graph ``name`` from its JSON object, then ``check_graph`` it."""
    nodes_raw = r.child("nodes")
    nodes: dict[str, PolicyNode] = {}
    for node_id in nodes_raw.raw:
        nr = nodes_raw.child(node_id)
        mr = nr.child("model")
        actions = tuple(
            Action(kind=a.text("kind"),  # type: ignore[arg-type]  # check_graph checks it
                   sensor=a.get("sensor", (str, type(None)), None),
                   next=a.get("next", (str, type(None)), None))
            for a in nr.objects("actions"))
        head = mr.raw.get("action_head")
        nodes[node_id] = PolicyNode(
            sensors=nr.strings("sensors"),
            model=ModelRef(file=mr.text("file"), inputs=mr.ints("inputs"),
                           action_head=None if head is None else read_head(
                               head, f"{mr.path}.action_head", len(actions))),
            actions=actions, compute=_read_compute(nr))
    graph = PolicyGraph(root=r.text("root"), nodes=nodes)
    check_graph(graph, name=name, sensor_names=sensor_names, owner=owner, files=files,
                path=r.path)
    return graph


def _read_compute(nr: FieldReader) -> ComputeCost | None:
    """A node's optional ``compute`` object: finite numbers >= 0 (absent: None)."""
    if nr.get("compute", (dict, type(None)), None) is None:
        return None
    cr = nr.child("compute")
    unknown = sorted(set(cr.raw) - {"energy_mj", "latency_ms", "units"})
    if unknown:
        raise BundleError(f"unknown fields {unknown} (energy_mj, latency_ms, units)",
                          path=cr.path)
    values = {key: float(cr.get(key, (int, float), 0.0)) for key in ("energy_mj", "latency_ms",
                                                                     "units")}
    for key, value in values.items():
        if not math.isfinite(value) or value < 0:
            raise BundleError(f"must be a finite number >= 0, got {value}",
                              path=f"{cr.path}.{key}")
    return ComputeCost(**values)


def check_graph(graph: PolicyGraph, *, name: str, sensor_names: Collection[str],
                owner: Mapping[int, str], files: Collection[str], path: str) -> None:
    """Refuse (``BundleError`` naming the field under ``path``) a graph that breaks the rules:
    unknown root, sensors or model files, model inputs (feature columns; ``owner`` maps each
    to its sensor) not yielded by the node's sensors, a move to a missing node or to a sensor
    set that is not allowed, a cycle."""
    nodes = graph.nodes
    if graph.root not in nodes:
        raise BundleError(f"root {graph.root!r} is not a node", path=f"{path}.root")
    for node_id, node in nodes.items():
        at = f"{path}.nodes.{node_id}"
        for sensor in node.sensors:
            if sensor not in sensor_names:
                raise BundleError(f"unknown sensor {sensor!r} (the bundle has "
                                  f"{list(sensor_names)})", path=f"{at}.sensors")
        if len(set(node.sensors)) != len(node.sensors):
            raise BundleError("lists a sensor twice", path=f"{at}.sensors")
        if node.model.file not in files:
            raise BundleError(f"names file {node.model.file!r}, which is not listed in files",
                              path=f"{at}.model.file")
        for col in node.model.inputs:
            if owner.get(col) not in node.sensors:
                raise BundleError(f"model input feature {col} is not yielded by this node's "
                                  f"sensors {list(node.sensors)}", path=f"{at}.model.inputs")
        if not node.actions:
            raise BundleError("a node needs at least one action", path=f"{at}.actions")
        for i, action in enumerate(node.actions):
            _check_action(action, node, nodes, sensor_names, f"{at}.actions[{i}]")
    cycle = find_cycle(graph)
    if cycle is not None:
        raise BundleError(f"policy graph {name!r} has a cycle: {' -> '.join(cycle)}; a walk "
                          "must always reach a stop or escalate", path=f"{path}.nodes")


def _check_action(action: Action, node: PolicyNode, nodes: Mapping[str, PolicyNode],
                  sensor_names: Collection[str], at: str) -> None:
    kind = action.kind
    if kind not in ACTION_KINDS:
        raise BundleError(f"unknown action kind {kind!r} (one of {ACTION_KINDS})",
                          path=f"{at}.kind")
    if kind == "acquire":
        if action.sensor not in sensor_names:
            raise BundleError(f"unknown sensor {action.sensor!r}", path=f"{at}.sensor")
        if action.sensor in node.sensors:
            raise BundleError(f"acquires {action.sensor!r}, which this node already holds",
                              path=f"{at}.sensor")
    elif action.sensor is not None:
        raise BundleError(f"a {kind} action takes no sensor", path=f"{at}.sensor")
    if kind not in MOVE_KINDS:
        if action.next is not None:
            raise BundleError(f"a {kind} action takes no next node", path=f"{at}.next")
        return
    if action.next is None:
        raise BundleError(f"a move ({kind}) needs a next node", path=f"{at}.next")
    target = nodes.get(action.next)
    if target is None:
        raise BundleError(f"next node {action.next!r} does not exist", path=f"{at}.next")
    held, reached = set(node.sensors), set(target.sensors)
    if kind == "acquire" and reached != held | {action.sensor}:
        raise BundleError(
            f"node {action.next!r} holds {list(target.sensors)}, but acquiring "
            f"{action.sensor!r} from {list(node.sensors)} must reach exactly their union",
            path=f"{at}.next")
    if kind == "route" and not held <= reached:
        raise BundleError(
            f"node {action.next!r} holds {list(target.sensors)}, which lacks "
            f"{sorted(held - reached)} of this node's sensors: a route may only add sensors",
            path=f"{at}.next")


def successors(node: PolicyNode) -> Iterator[str]:
    """The nodes this node's actions move to, in listed order."""
    for action in node.actions:
        if action.kind in MOVE_KINDS and action.next is not None:
            yield action.next


def _depth_first(graph: PolicyGraph) -> tuple[list[str], list[str] | None]:
    """Post-order of an iterative depth-first search from every node (no recursion limit on
    deep graphs), and the first cycle met (``[a, b, a]``) or None. Moves to missing nodes are
    ignored (``check_graph`` names those first)."""
    order: list[str] = []
    done: set[str] = set()
    for start in graph.nodes:
        if start in done:
            continue
        stack: list[tuple[str, Iterator[str]]] = [(start, successors(graph.nodes[start]))]
        on_path = {start}
        while stack:
            node_id, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                on_path.discard(node_id)
                done.add(node_id)
                order.append(node_id)
            elif child in on_path:
                ids = [n for n, _ in stack]
                return order, [*ids[ids.index(child):], child]
            elif child not in done and child in graph.nodes:
                stack.append((child, successors(graph.nodes[child])))
                on_path.add(child)
    return order, None


def find_cycle(graph: PolicyGraph) -> list[str] | None:
    """A cycle as node ids from its first node back to it (``[a, b, a]``), or None."""
    return _depth_first(graph)[1]


def topological_order(graph: PolicyGraph) -> list[str]:
    """Node ids such that every move goes to a later node (the graph must be acyclic)."""
    order, cycle = _depth_first(graph)
    if cycle is not None:
        raise BundleError(f"the policy graph has a cycle: {' -> '.join(cycle)}")
    order.reverse()
    return order
