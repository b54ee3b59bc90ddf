"""The ``route`` action (issue 12, ROUTE_CONTRACT.md): a hand-built graph with a zero-read route,
multi-read routes, an acquire and escalations walks identically wherever ``protocol.walk`` is
driven (the trainer's float64 batched walk, the float32 ONNX oracle, the edge runtime's per-row
walk) and in the tests' independent reference walk: answers, sensors read, costs; the manifest refuses a cycle by name and a route to a node lacking a
sensor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from adaptedge.edge import EdgeRuntime
from adaptedge.protocol import (
    Action,
    BundleError,
    CostWeights,
    HpcRef,
    LinkSpec,
    Manifest,
    ModelRef,
    OperatingPoint,
    PolicyGraph,
    PolicyNode,
    SensorSpec,
    write_bundle,
)
from adaptedge.protocol.costs import decision_cost
from adaptedge.protocol.policy_graph import check_graph, find_cycle, topological_order
from tests.support.edge_doubles import HpcUplink
from tests.support.reference_walk import ReferenceWalk

F32 = npt.NDArray[np.float32]
POLICY = "routes"
# Energies are powers of two: a sensor paid twice (or never) shows in the sum.
SENSORS = (SensorSpec("a", (0,), energy_mj=1.0, latency_ms=1.0),
           SensorSpec("b", (1,), energy_mj=2.0, latency_ms=2.0, money=0.5),
           SensorSpec("c", (2,), energy_mj=4.0, latency_ms=4.0),
           SensorSpec("d", (3,), energy_mj=8.0, latency_ms=8.0),
           SensorSpec("e", (4,), energy_mj=16.0, latency_ms=16.0))
# node: (sensors in listed order, model inputs, actions). From the root (a, b): a zero-read
# route to ab2 (b, a), a multi-read route to abdc (reads d then c: the target's listed order),
# an acquire of c, an escalate (the HPC also needs e).
NODES: dict[str, tuple[tuple[str, ...], tuple[int, ...], tuple[Action, ...]]] = {
    "root": (("a", "b"), (0, 1), (Action("stop"), Action("route", next="ab2"),
                                  Action("route", next="abdc"), Action("acquire", "c", "abc"),
                                  Action("escalate"))),
    "ab2": (("b", "a"), (1, 0), (Action("stop"), Action("route", next="abdc"),
                                 Action("escalate"))),
    "abc": (("a", "b", "c"), (2, 0, 1), (Action("stop"), Action("route", next="abdc"),
                                         Action("escalate"))),
    "abdc": (("a", "b", "d", "c"), (3, 2, 0, 1), (Action("stop"), Action("route", next="all"),
                                                  Action("escalate"))),
    "all": (("a", "b", "d", "c", "e"), (4, 3, 2, 1, 0), (Action("stop"),)),
}


def linear_model(W: F32, b: F32, A: F32 | None, c: F32 | None) -> bytes:
    """The one use of an ONNX builder here: softmax(x W + b) [, action_scores = x A + c]."""
    from tests.support.toy_bundle import linear_model_bytes

    return linear_model_bytes(W, b, A, c)


@dataclass(frozen=True)
class RouteGraph:
    path: Path
    manifest: Manifest
    weights: dict[str, tuple[F32, F32, F32 | None, F32 | None]]
    """Per node (and ``hpc``): W, b, A, c of its model, for walks that do not read ONNX."""


def sector_scores(n_inputs: int, angles: list[float]) -> F32:
    """Action weights on the first two inputs pointing at ``angles``: each action wins on a
    sector of that plane, so normal rows reaching the node take several actions."""
    A = np.zeros((n_inputs, len(angles)), np.float32)
    A[0], A[1] = np.cos(angles), np.sin(angles)
    return A


def spread(n: int) -> list[float]:
    return (2 * np.pi * np.arange(n) / n + 0.3).tolist()


# The root sends rows to ab2 in a 72-degree cone of (a, b); ab2 splits that cone.
ANGLES = {"ab2": [-0.4, 0.4, np.pi]}


@pytest.fixture()
def route_graph(tmp_path: Path) -> RouteGraph:
    rng = np.random.default_rng(7)
    weights: dict[str, tuple[F32, F32, F32 | None, F32 | None]] = {}
    nodes: dict[str, PolicyNode] = {}
    hpc = rng.normal(size=(5, 2)).astype(np.float32)
    hpc[[1, 2, 3]] = 0.0  # an HPC over sensors a and e looks at their columns only
    weights["hpc"] = (hpc, np.zeros(2, np.float32), None, None)
    files = {"hpc.onnx": linear_model(*weights["hpc"])}
    for node_id, (sensors, inputs, actions) in NODES.items():
        W = rng.normal(size=(len(inputs), 2)).astype(np.float32)
        b = (rng.normal(size=2) * 0.1).astype(np.float32)
        multi = len(actions) > 1
        A = sector_scores(len(inputs), ANGLES.get(node_id, spread(len(actions)))) \
            if multi else None
        c = np.zeros(len(actions), np.float32) if multi else None
        weights[node_id] = (W, b, A, c)
        files[f"{node_id}.onnx"] = linear_model(W, b, A, c)
        nodes[node_id] = PolicyNode(sensors, ModelRef(f"{node_id}.onnx", inputs), actions)
    manifest = Manifest(
        schema_version=1, bundle_id="pending", classes=("no", "yes"),
        feature_names=("a0", "b0", "c0", "d0", "e0"), sensors=SENSORS,
        link=LinkSpec(request_bytes=100, reply_bytes=50, rtt_ms=30.0, cloud_cost_per_call=1.0),
        cost_weights=CostWeights(energy_mj=1.0, latency_ms=0.5, money=2.0),
        hpc=HpcRef("hpc.onnx", ("a", "e"), accuracy=0.9),
        policies={POLICY: PolicyGraph(root="root", nodes=nodes)},
        operating_points=(OperatingPoint(POLICY, POLICY, accuracy=0.8, cost=10.0),),
        default_operating_point=POLICY, files={})
    path = tmp_path / "routes"
    return RouteGraph(path, write_bundle(path, manifest, files), weights)


def route_rows(n: int, seed: int) -> F32:
    return np.random.default_rng(seed).normal(scale=2.0, size=(n, 5)).astype(np.float32)


@dataclass(frozen=True)
class Outcomes:
    """What a walk answered on each row: label, escalated, sensors read, cost (real units)."""

    labels: list[int]
    escalated: list[bool]
    sensors_read: list[frozenset[str]]
    cost: list[tuple[float, float, float, float, int]]
    """scalar, energy_mj, latency_ms, money, bytes."""


def oracle_outcomes(graph: RouteGraph, X: F32) -> Outcomes:
    """The float32 ONNX oracle (``trainer.policy.oracle``), batched."""
    from adaptedge.trainer.policy.oracle import evaluate_policy

    r = evaluate_policy(graph.path, POLICY, X)
    names = np.array(r.sensor_names)
    return Outcomes(
        labels=r.labels.tolist(), escalated=r.escalated.tolist(),
        sensors_read=[frozenset(names[row].tolist()) for row in r.sensors_read],
        cost=[(float(r.cost[i]), float(r.energy_mj[i]), float(r.latency_ms[i]),
               float(r.money[i]), int(r.bytes[i])) for i in range(len(X))])


def edge_outcomes(graph: RouteGraph, X: F32) -> Outcomes:
    """The device walk (``EdgeRuntime.predict_row``), row by row, the cloud answering with
    the bundle's HPC."""
    uplink = HpcUplink(ReferenceWalk(graph.path, graph.manifest))
    with EdgeRuntime.load(graph.path, uplink=uplink) as rt:
        decisions = [rt.predict_row(row) for row in X]
    return Outcomes(
        labels=[d.label_index for d in decisions], escalated=[d.escalated for d in decisions],
        sensors_read=[frozenset(d.sensors_read) for d in decisions],
        cost=[(d.cost.scalar, d.cost.energy_mj, d.cost.latency_ms, d.cost.money, d.cost.bytes)
              for d in decisions])


def reference_outcomes(graph: RouteGraph, X: F32) -> Outcomes:
    """The tests' own row-by-row walk (``support.reference_walk``), costs by protocol.costs."""
    ref = ReferenceWalk(graph.path, graph.manifest)
    steps = [ref.walk(POLICY, row) for row in X]
    costs = [ref.cost(s["sensors_read"], s["escalated"]) for s in steps]
    return Outcomes(
        labels=[s["answer"] for s in steps], escalated=[s["escalated"] for s in steps],
        sensors_read=[frozenset(s["sensors_read"]) for s in steps],
        cost=[(c.scalar, c.energy_mj, c.latency_ms, c.money, c.bytes) for c in costs])


class Linear64:
    """A trainer node model (``trainer.policy.graph.NodeModel``) in float64, from the weights
    of the node's ONNX file."""

    def __init__(self, W: F32, b: F32, A: F32 | None, c: F32 | None) -> None:
        self.weights = (W, b, A, c)

    def proba(self, X: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
        W, b, _, _ = self.weights
        z = np.asarray(X, np.float64) @ W.astype(np.float64) + b.astype(np.float64)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]

    def action_scores(self, X: npt.NDArray[np.floating]) -> npt.NDArray[np.float64] | None:
        _, _, A, c = self.weights
        if A is None or c is None:
            return None
        return np.asarray(X, np.float64) @ A.astype(np.float64) + c.astype(np.float64)  # type: ignore[no-any-return]

    def to_onnx(self) -> bytes:
        return linear_model(*self.weights)


def float64_outcomes(graph: RouteGraph, X: F32) -> Outcomes:
    """The trainer's one float64 walk (``trainer.policy.walk``) on the same weights."""
    from adaptedge.protocol.costs import cost_columns, decision_costs
    from adaptedge.trainer.policy.graph import Graph, GraphAction, GraphNode
    from adaptedge.trainer.policy.walk import CostTable, walk

    m = graph.manifest
    policy = m.policies[POLICY]
    nodes = {nid: GraphNode(node.sensors, node.model.inputs,
                            tuple(GraphAction(a.kind, a.next, a.sensor) for a in node.actions),
                            Linear64(*graph.weights[nid]))
             for nid, node in policy.nodes.items()}
    per_sensor, link = cost_columns(m.sensors, m.link, m.cost_weights)
    names = tuple(s.name for s in m.sensors)
    table = CostTable(names, per_sensor[:, 0], float(link[0]),
                      np.array([n in m.hpc.sensors for n in names]))
    r = walk(Graph(POLICY, policy.root, nodes), X, Linear64(*graph.weights["hpc"]).proba(X), table)
    costs = decision_costs(r.read, r.escalated, per_sensor, link)
    return Outcomes(
        labels=r.answer.tolist(), escalated=r.escalated.tolist(),
        sensors_read=[frozenset(np.array(names)[row].tolist()) for row in r.read],
        cost=[(float(r.cost[i]), *map(float, costs[i, 1:4]), round(float(costs[i, 4])))
              for i in range(len(X))])


# Every walk in WALKS must agree on every row: (RouteGraph, rows) -> Outcomes.
WALKS: dict[str, Callable[[RouteGraph, F32], Outcomes]] = {
    "onnx-oracle": oracle_outcomes,
    "edge": edge_outcomes,
    "reference": reference_outcomes,
    "float64": float64_outcomes,
}


def test_every_walk_agrees_on_answers_sensors_and_costs(route_graph: RouteGraph,
                                                        global_random_seed: int) -> None:
    X = route_rows(600, global_random_seed)
    results = {name: walk(route_graph, X) for name, walk in WALKS.items()}
    (first, want), *others = results.items()
    for name, got in others:
        for i in range(len(X)):
            assert got.labels[i] == want.labels[i], (name, first, i)
            assert got.escalated[i] == want.escalated[i], (name, first, i)
            assert got.sensors_read[i] == want.sensors_read[i], (name, first, i)
            assert got.cost[i][:4] == pytest.approx(want.cost[i][:4], rel=1e-12), (name, i)
            assert got.cost[i][4] == want.cost[i][4], (name, first, i)
    for i in range(len(X)):  # and every cost is protocol.costs' (each sensor paid once)
        cost = decision_cost(route_graph.manifest, want.sensors_read[i], want.escalated[i])
        assert want.cost[i][0] == pytest.approx(cost.scalar, rel=1e-12)


def test_routes_read_none_one_or_several_sensors_in_the_targets_order(
        route_graph: RouteGraph, global_random_seed: int) -> None:
    X = route_rows(600, global_random_seed)
    uplink = HpcUplink(ReferenceWalk(route_graph.path, route_graph.manifest))
    seen: set[tuple[str, ...]] = set()
    with EdgeRuntime.load(route_graph.path, uplink=uplink) as rt:
        for row in X:
            d = rt.predict_row(row)
            seen.add(d.nodes)
            if d.nodes == ("root", "ab2") and not d.escalated:  # zero-read route: a, b only
                assert d.sensors_read == ("a", "b") and d.cost.energy_mj == 3.0
            if d.nodes == ("root", "abdc") and not d.escalated:  # reads d then c
                assert d.sensors_read == ("a", "b", "d", "c") and d.cost.energy_mj == 15.0
            if d.nodes[:2] == ("root", "abc") and d.nodes[-1] == "abdc" and not d.escalated:
                assert d.sensors_read == ("a", "b", "c", "d")  # the route then reads d only
            if d.nodes[-1] == "all":
                assert sorted(d.sensors_read) == ["a", "b", "c", "d", "e"]
                assert d.cost.energy_mj == 31.0  # five sensors, each paid once
            if d.escalated and d.nodes == ("root",):  # the HPC's unread sensor e, then the link
                assert d.sensors_read == ("a", "b", "e") and d.source == "cloud"
            live = rt.predict({s.name: (lambda v=float(row[s.features[0]]): [v])
                               for s in SENSORS})
            assert (live.nodes, live.sensors_read, live.label_index, live.cost) == (
                d.nodes, d.sensors_read, d.label_index, d.cost)
    wanted = {("root", "ab2"), ("root", "abdc"), ("root", "abc"), ("root", "ab2", "abdc"),
              ("root", "abc", "abdc"), ("root", "abdc", "all"), ("root",)}
    assert wanted <= seen, f"paths not exercised: {wanted - seen}"


def test_the_oracle_orders_nodes_topologically(route_graph: RouteGraph) -> None:
    order = topological_order(route_graph.manifest.policies[POLICY])
    assert order.index("root") < order.index("ab2") < order.index("abdc") < order.index("all")
    assert order.index("abc") < order.index("abdc")
    assert find_cycle(route_graph.manifest.policies[POLICY]) is None


def _edit_actions(graph: RouteGraph, node: str, actions: list[dict[str, str]]) -> dict[str, object]:
    raw = graph.manifest.to_dict()
    raw["policies"][POLICY]["nodes"][node]["actions"] = actions
    return raw


@pytest.mark.parametrize(("node", "actions", "cycle"), [
    ("abdc", [{"kind": "route", "next": "ab2"}], None),  # lacks d and c: refused first
    ("ab2", [{"kind": "route", "next": "root"}], "policy graph 'routes' has a cycle: "
                                                  "root -> ab2 -> root"),
    ("all", [{"kind": "route", "next": "all"}], "policy graph 'routes' has a cycle: all -> all"),
])
def test_manifest_refuses_cycles_naming_them(route_graph: RouteGraph, node: str,
                                             actions: list[dict[str, str]],
                                             cycle: str | None) -> None:
    raw = _edit_actions(route_graph, node, actions)
    with pytest.raises(BundleError) as info:
        Manifest.from_dict(raw)
    if cycle is None:
        assert info.value.path == f"policies.{POLICY}.nodes.{node}.actions[0].next"
        assert "lacks ['c', 'd']" in info.value.message
    else:
        assert cycle in info.value.message
        assert info.value.path == f"policies.{POLICY}.nodes"


@pytest.mark.parametrize(("action", "field", "message"), [
    ({"kind": "route", "next": "root"}, "next", "a route may only add sensors"),
    ({"kind": "route"}, "next", "needs a next node"),
    ({"kind": "route", "next": "nope"}, "next", "does not exist"),
    ({"kind": "route", "sensor": "c", "next": "abc"}, "sensor", "takes no sensor"),
    ({"kind": "acquire", "sensor": "d", "next": "all"}, "next", "exactly their union"),
])
def test_manifest_refuses_bad_routes_naming_the_field(route_graph: RouteGraph,
                                                      action: dict[str, str], field: str,
                                                      message: str) -> None:
    raw = _edit_actions(route_graph, "abc", [action])
    with pytest.raises(BundleError, match=message) as info:
        Manifest.from_dict(raw)
    assert info.value.path == f"policies.{POLICY}.nodes.abc.actions[0].{field}"


def test_check_graph_refuses_typed_graphs_before_export(route_graph: RouteGraph) -> None:
    m = route_graph.manifest
    owner = {col: s.name for s in m.sensors for col in s.features}
    names = [s.name for s in m.sensors]

    def check(node: PolicyNode) -> None:
        check_graph(PolicyGraph("n", {"n": node}), name="p", sensor_names=names, owner=owner,
                    files=m.files, path="p")

    check(PolicyNode(("a",), ModelRef("root.onnx", (0,)), (Action("stop"),)))
    for node, field, message in [
        (PolicyNode(("zz",), ModelRef("root.onnx", ()), (Action("stop"),)), "sensors",
         "unknown sensor 'zz'"),
        (PolicyNode(("a", "a"), ModelRef("root.onnx", ()), (Action("stop"),)), "sensors",
         "twice"),
        (PolicyNode(("a",), ModelRef("x.onnx", ()), (Action("stop"),)), "model.file",
         "not listed"),
        (PolicyNode(("a",), ModelRef("root.onnx", (1,)), (Action("stop"),)), "model.inputs",
         "not yielded"),
        (PolicyNode(("a",), ModelRef("root.onnx", ()), ()), "actions", "at least one"),
        (PolicyNode(("a",), ModelRef("root.onnx", ()), (Action("jump"),)),  # type: ignore[arg-type]
         "actions[0].kind", "unknown action kind"),
    ]:
        with pytest.raises(BundleError, match=message) as info:
            check(node)
        assert info.value.path == f"p.nodes.n.{field}"
