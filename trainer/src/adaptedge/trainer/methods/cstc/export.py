"""A trained tree or cascade as the trainer's one policy graph (``trainer.policy.graph``).

Node ``k`` becomes graph node ``n{k}``. Its ``sensors`` are every sensor read on the path to
it (the parent's, then the node classifier's new ones), its ``inputs`` the columns of its own
classifier. A routing node's actions are ``route`` to its ``hi`` child then to its ``lo``
child (a cascade: ``route`` on, then ``stop``), scored ``[s, -s]`` with ``s = z v - theta``
(the first wins a tie, as ``s >= 0`` routes up in training). A terminal node stops with its
classifier or, with an escalation ``threshold``, stops when confident and escalates
otherwise (the ``confidence`` head: ``|z| >= logit(threshold)`` for two classes, the top
probability ``>= threshold`` otherwise).

A node that reads nothing (every weight pruned) answers a constant. A constant on a tie (a
balanced data set's prior at a large lambda: logit ~1e-10) would be decided by float32
rounding in ONNX and float64 in the walk, differently on every row; ``untie`` moves such a
constant ``TIE_GAP`` past the tie on the side the float64 walk takes, so both decide alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.policy_graph import ComputeCost
from adaptedge.trainer.export.linear import linear_core
from adaptedge.trainer.export.models import linear_node_model, node_model
from adaptedge.trainer.methods.cstc.estimator import proba_from_logits
from adaptedge.trainer.methods.cstc.objective import FloatArray
from adaptedge.trainer.methods.cstc.optimise import CostSensitiveModel
from adaptedge.trainer.methods.cstc.tree_node import tree_node
from adaptedge.trainer.methods.tree_compute import trees_compute
from adaptedge.trainer.policy.graph import Graph, GraphAction, GraphNode

TIE_GAP = 1e-3
"""A constant node's logit lead (or route score) is at least this far from a tie."""


def untie(b: FloatArray) -> FloatArray:
    """Constant logits ``b`` with the float64 argmax's lead raised to ``TIE_GAP``."""
    out = np.array(b, dtype=np.float64)
    if len(out) == 1:
        out[0] = max(out[0], TIE_GAP) if out[0] > 0 else min(out[0], -TIE_GAP)
        return out
    top = int(out.argmax())
    second = float(np.delete(out, top).max())
    out[top] = max(out[top], second + TIE_GAP)
    return out


@dataclass(frozen=True)
class LinearNode:
    """``z = x W + b`` on the node's inputs; routing ``[s, -s]``, confidence or nothing."""

    W: FloatArray
    b: FloatArray
    route: tuple[FloatArray, float] | None = None
    """(u, c): ``s = x u + c``."""
    threshold: float | None = None
    """Escalate below this confidence (a terminal with escalation)."""

    def logits(self, X: NDArray[np.floating]) -> FloatArray:
        out: FloatArray = np.asarray(X, dtype=np.float64) @ self.W + self.b
        return out

    def proba(self, X: NDArray[np.floating]) -> FloatArray:
        return proba_from_logits(self.logits(X))

    def confidence_score(self, X: NDArray[np.floating]) -> FloatArray:
        assert self.threshold is not None
        z = self.logits(X)
        if z.shape[1] == 1:
            t = math.log(self.threshold / (1 - self.threshold))
            out: FloatArray = np.abs(z[:, 0]) - t
            return out
        return self.proba(X).max(axis=1) - self.threshold  # type: ignore[no-any-return]

    def action_scores(self, X: NDArray[np.floating]) -> FloatArray | None:
        if self.route is not None:
            s = np.asarray(X, dtype=np.float64) @ self.route[0] + self.route[1]
            return np.column_stack([s, -s])
        if self.threshold is not None:
            s = self.confidence_score(X)
            return np.column_stack([s, -s])
        return None

    def to_onnx(self) -> bytes:
        m = self.W.shape[1]
        n_classes = 2 if m == 1 else m
        if self.route is not None:
            W2 = np.hstack([np.zeros_like(self.W), self.W]) if m == 1 else self.W
            b2 = np.concatenate([[0.0], self.b]) if m == 1 else self.b
            u, c = self.route
            return linear_node_model(W2, b2, np.column_stack([u, -u]), np.array([c, -c]))
        nodes, inits = linear_core(self.W, self.b)
        if self.threshold is None:
            return node_model(nodes, inits, self.W.shape[0], n_classes, "stop")
        t = (math.log(self.threshold / (1 - self.threshold)) if m == 1 else self.threshold)
        return node_model(nodes, inits, self.W.shape[0], n_classes, "confidence",
                          confidence_threshold=t)


def to_graph(model: CostSensitiveModel, sensor_names: tuple[str, ...],
             sensor_columns: tuple[tuple[int, ...], ...], threshold: float | None = None,
             params: dict[str, float | str] | None = None,
             tree_compute: ComputeCost | None = None) -> Graph:
    """The policy graph of ``model`` (``sensor_columns[g]``: the columns sensor ``g`` yields).
    A boosted model's nodes are ``TreeNode``s, each charged ``tree_compute`` per tree it
    evaluates (``GraphNode.compute``)."""
    shape = model.shape
    nodes: dict[str, GraphNode] = {}
    for k in shape.alive():
        path = shape.path(k)
        read: list[int] = []
        for j in path:
            read += [g for g in model.groups[j] if g not in read]
        inputs = tuple(sorted(c for g in model.groups[k] for c in sensor_columns[g]))
        if model.features is not None and inputs:
            nodes[f"n{k}"] = _tree_graph_node(model, k, inputs, threshold, tree_compute,
                                              tuple(sensor_names[g] for g in read))
            continue
        W = model.W[k][list(inputs)] if model.features is None else np.zeros((0, len(model.b[k])))
        b = model.b[k]
        if not inputs and not (shape.routes(k) or threshold is not None):
            b = untie(b)
        if shape.routes(k):
            u = W @ model.v[k]
            c = float(b @ model.v[k] - model.theta[k])
            if not inputs and abs(c) < TIE_GAP:
                c = TIE_GAP  # training routes s >= 0 to hi
            node_model_ = LinearNode(W, b, route=(u, c))
        else:
            node_model_ = LinearNode(W, b, threshold=threshold)
        nodes[f"n{k}"] = GraphNode(sensors=tuple(sensor_names[g] for g in read), inputs=inputs,
                                   actions=_actions(model, k, threshold), model=node_model_)
    return Graph("", "n0", nodes, params=dict(params or {}))


def _actions(model: CostSensitiveModel, k: int, threshold: float | None
             ) -> tuple[GraphAction, ...]:
    shape = model.shape
    if shape.routes(k):
        lo = shape.lo[k]
        return (GraphAction("route", f"n{shape.hi[k]}"),
                GraphAction("route", f"n{lo}") if lo >= 0 else GraphAction("stop"))
    if threshold is not None:
        return (GraphAction("stop"), GraphAction("escalate"))
    return (GraphAction("stop"),)


def _tree_graph_node(model: CostSensitiveModel, k: int, inputs: tuple[int, ...],
                     threshold: float | None, tree_compute: ComputeCost | None,
                     sensors: tuple[str, ...]) -> GraphNode:
    routes = model.shape.routes(k)
    node, n_trees = tree_node(model, k, inputs, routes, None if routes else threshold)
    compute = trees_compute(tree_compute, n_trees) if tree_compute is not None else None
    return GraphNode(sensors=sensors, inputs=inputs, actions=_actions(model, k, threshold),
                     model=node, compute=compute)


def describe(graph: Graph) -> list[str]:
    """One line per node: what it reads and where it goes (for reports)."""
    lines = []
    for nid, node in graph.nodes.items():
        acts = ", ".join(f"{a.kind}->{a.next}" if a.next else a.kind for a in node.actions)
        lines.append(f"{nid}: sensors={list(node.sensors)} actions=[{acts}]")
    return lines
