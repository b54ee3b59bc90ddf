"""Graph-Reduce's lattice policies as the trainer's one policy graph, and their walk.

``expand`` turns the trained lattice nodes (``UnitNode``) into a ``trainer.policy.graph.Graph``
whose node models (``DagNodeModel``) are the bank's classifiers followed by the linear node
policies; every multi-sensor step becomes a chain of pass-through nodes, because a manifest
``acquire`` reads exactly one sensor. ``prune`` drops what no walked example used.
``evaluate`` walks a graph with the bank's (out-of-fold on ``train``) probabilities.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from adaptedge.trainer.methods.dag.bank import ClassifierBank
from adaptedge.trainer.methods.dag.export import OnnxCache, node_onnx
from adaptedge.trainer.methods.dag.graph import (
    TIE_BAND,
    NodePolicy,
    UnitNode,
    node_id,
    policy_features,
)
from adaptedge.trainer.methods.dag.problem import FloatArray, SensorSet
from adaptedge.trainer.policy.graph import Graph, GraphAction, GraphNode, Metrics
from adaptedge.trainer.policy.walk import IntArray, NodeOutputs, WalkResult, walk


@dataclass(frozen=True)
class DagNodeModel:
    """The classifier of sensor set ``classifier`` and, with several actions, ``policy`` on
    ``[x, probabilities, top-1, margin]`` (``action_scores``; the walk applies ``TIE_BAND``)."""

    bank: ClassifierBank
    classifier: SensorSet
    """The bank entry whose model answers here (a chain node borrows its source's)."""
    policy: NodePolicy | None

    def proba(self, X: NDArray[np.floating]) -> FloatArray:
        return self.bank.predict(self.classifier, X)

    def action_scores(self, X: NDArray[np.floating]) -> FloatArray | None:
        if self.policy is None:
            return None
        return self.policy.scores(policy_features(X, self.proba(X)))

    def to_onnx(self) -> bytes:
        return node_onnx(OnnxCache.of(self.bank), self.classifier, self.policy)


def dag_node(bank: ClassifierBank, sensors: SensorSet, classifier: SensorSet,
             actions: tuple[GraphAction, ...], policy: NodePolicy | None) -> GraphNode:
    problem = bank.problem
    return GraphNode(sensors=problem.sensor_names(sensors), inputs=problem.columns(classifier),
                     actions=actions, model=DagNodeModel(bank, classifier, policy),
                     tie_band=TIE_BAND)


def expand(bank: ClassifierBank, root: SensorSet, units: dict[SensorSet, UnitNode],
           params: dict[str, float | str] | None = None) -> Graph:
    """Per-sensor graph: a step adding k > 1 sensors becomes k - 1 pass-through chain nodes."""
    names = bank.problem.sensor_names(bank.problem.all_sensors)
    nodes: dict[str, GraphNode] = {}
    for source, unit in units.items():
        src = node_id(source)
        actions: list[GraphAction] = []
        for kind, target in unit.actions:
            if kind != "acquire":
                actions.append(GraphAction(kind))
                continue
            assert target is not None
            added = [s for s in target if s not in source]
            hops = [node_id(target)] if len(added) == 1 else [
                f"{src}-{node_id(target)}-{k}" for k in range(1, len(added))] + [node_id(target)]
            actions.append(GraphAction("acquire", hops[0], names[added[0]]))
            held = list(source)
            for k in range(1, len(added)):
                held.append(added[k - 1])
                nodes[hops[k - 1]] = dag_node(
                    bank, tuple(sorted(held)), source,
                    (GraphAction("acquire", hops[k], names[added[k]]),), None)
        nodes[src] = dag_node(bank, source, source, tuple(actions), unit.policy)
    return Graph("", node_id(root), nodes, params=dict(params or {}))


def prune(graph: Graph, used: dict[str, set[int]]) -> Graph:
    """Drop acquire actions no walked example took, then nodes no longer reachable.

    Decisions of the walked examples do not change (their argmax stays among the kept
    actions); any other example takes its best kept action, in Python and ONNX alike.
    """
    kept: dict[str, GraphNode] = {}
    for nid, node in graph.nodes.items():
        keep = [i for i, a in enumerate(node.actions)
                if a.kind != "acquire" or i in used.get(nid, set())]
        if not keep:
            keep = sorted(used.get(nid, {0})) or [0]
        model = node.model
        assert isinstance(model, DagNodeModel)
        policy = None if len(keep) == 1 or model.policy is None else model.policy.keep(keep)
        kept[nid] = replace(node, actions=tuple(node.actions[i] for i in keep),
                            model=replace(model, policy=policy))
    reachable: dict[str, GraphNode] = {}
    queue = deque([graph.root])
    while queue:
        nid = queue.popleft()
        if nid in reachable:
            continue
        reachable[nid] = kept[nid]
        queue.extend(a.next for a in kept[nid].actions if a.next is not None)
    return replace(graph, nodes=reachable)


def bank_outputs(bank: ClassifierBank, split: str) -> NodeOutputs:
    """Node outputs from the bank's cached probabilities on ``split`` (out-of-fold on train)."""
    X = bank.problem.splits[split].X

    def outputs(nid: str, node: GraphNode, rows: IntArray) -> tuple[FloatArray, FloatArray | None]:
        model = node.model
        assert isinstance(model, DagNodeModel)
        proba = bank.proba(model.classifier, split)[rows]
        if model.policy is None or len(node.actions) == 1:
            return proba, None
        cols = np.asarray(node.inputs, dtype=np.int64)
        x = X[np.ix_(rows, cols)] if cols.size else np.zeros((len(rows), 0))
        return proba, model.policy.scores(policy_features(x, proba))

    return outputs


def dag_walk(graph: Graph, bank: ClassifierBank, split: str) -> WalkResult:
    """The one walk on ``split``, with the bank's probabilities."""
    data = bank.problem.splits[split]
    return walk(graph, data.X, data.hpc_proba, bank.problem.cost_table(),
                bank_outputs(bank, split))


def evaluate(graph: Graph, bank: ClassifierBank, split: str) -> Metrics:
    return dag_walk(graph, bank, split).metrics(bank.problem.splits[split].y)
