"""Regression node models (issue 33, contract item 4): input ``x`` (the node's columns),
output ``value`` float32 [N, 1] instead of ``probabilities``, plus ``action_scores`` [N, 2]
exactly as a classification node's when the node routes.

``RegressionLinearNode`` is a CSTC regressor node: ``value = x w + b``; a routing node scores
``[s, -s]`` with ``s = x w + b - theta`` (route to ``hi`` first: training routes ``s >= 0``
up). ``RegressionTreeNode`` is a Greedy Miser stop node (``value`` from its trees).
``cstc_regression_graph`` turns a trained ``CSTCRegressor`` into the trainer's policy graph.
``proba`` answers an empty [N, 0] array: a regression decision has no class probabilities.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.onnx_contract import ACTION_OUTPUT, VALUE_OUTPUT
from adaptedge.trainer.export.graph import GraphBuilder
from adaptedge.trainer.export.linear import linear
from adaptedge.trainer.policy.graph import Graph, GraphAction, GraphNode

FloatArray = NDArray[np.float64]


def regression_linear_model(w: NDArray[np.floating], b: float,
                            route: tuple[NDArray[np.floating], float] | None = None) -> bytes:
    """``value = x w + b`` [N, 1]; with ``route = (u, c)`` also ``action_scores = [s, -s]``,
    ``s = x u + c``."""
    W = np.asarray(w, dtype=np.float64).reshape(-1, 1)
    g = GraphBuilder(W.shape[0])
    linear(g, W, [b], output=VALUE_OUTPUT, name="v_")
    g.output(VALUE_OUTPUT, 1)
    if route is not None:
        u = np.asarray(route[0], dtype=np.float64).reshape(-1)
        linear(g, np.column_stack([u, -u]), [route[1], -route[1]], output=ACTION_OUTPUT,
               name="a_")
        g.output(ACTION_OUTPUT, 2)
    return g.to_bytes()


@dataclass(frozen=True)
class RegressionLinearNode:
    """``value = x w + b`` on the node's inputs; routing ``[s, -s]`` with ``s = x w + c``."""

    w: FloatArray
    b: float
    route_offset: float | None = None
    """``c = b - theta`` of a routing node (None: the node answers)."""

    def value(self, X: NDArray[np.floating]) -> FloatArray:
        out: FloatArray = np.asarray(X, dtype=np.float64) @ self.w + self.b
        return out

    def proba(self, X: NDArray[np.floating]) -> FloatArray:
        return np.zeros((len(X), 0))

    def action_scores(self, X: NDArray[np.floating]) -> FloatArray | None:
        if self.route_offset is None:
            return None
        s = np.asarray(X, dtype=np.float64) @ self.w + self.route_offset
        return np.column_stack([s, -s])

    def to_onnx(self) -> bytes:
        route = None if self.route_offset is None else (self.w, self.route_offset)
        return regression_linear_model(self.w, self.b, route)


@dataclass(frozen=True)
class RegressionTreeNode:
    """A stop node answering a fitted ``GreedyMiserRegressor`` on ``columns`` (its inputs)."""

    model: Any
    columns: tuple[int, ...]

    def value(self, X: NDArray[np.floating]) -> FloatArray:
        full = np.zeros((len(X), self.model.n_features_in_), dtype=np.float32)
        full[:, list(self.columns)] = np.asarray(X, dtype=np.float32)
        out: FloatArray = self.model.predict(full)
        return out

    def proba(self, X: NDArray[np.floating]) -> FloatArray:
        return np.zeros((len(X), 0))

    def action_scores(self, X: NDArray[np.floating]) -> FloatArray | None:
        return None

    def to_onnx(self) -> bytes:
        return bytes(self.model.to_onnx(list(self.columns)))


def cstc_regression_graph(regressor: Any, sensor_names: Sequence[str],
                          params: dict[str, float | str] | None = None) -> Graph:
    """The policy graph of a fitted ``CSTCRegressor``: node ``k`` is ``n{k}``, reading every
    sensor on its path, its inputs the columns of its own regressor."""
    model, columns = regressor.model_, regressor.groups_
    shape = model.shape
    nodes: dict[str, GraphNode] = {}
    for k in shape.alive():
        read: list[int] = []
        for j in shape.path(k):
            read += [g for g in model.groups[j] if g not in read]
        inputs = tuple(sorted(c for g in model.groups[k] for c in columns[g]))
        w = np.asarray(model.W[k][list(inputs), 0], dtype=np.float64)
        b = float(model.b[k][0])
        actions: tuple[GraphAction, ...]
        node: RegressionLinearNode
        if shape.routes(k):
            lo = shape.lo[k]
            node = RegressionLinearNode(w, b, b - float(model.theta[k]))
            actions = (GraphAction("route", f"n{shape.hi[k]}"),
                       GraphAction("route", f"n{lo}") if lo >= 0 else GraphAction("stop"))
        else:
            node, actions = RegressionLinearNode(w, b), (GraphAction("stop"),)
        nodes[f"n{k}"] = GraphNode(sensors=tuple(sensor_names[g] for g in read),
                                   inputs=inputs, actions=actions, model=node)
    return Graph("", "n0", nodes, params=dict(params or {}), method="cstc")


def greedy_miser_regression_graph(regressor: Any, sensor_names: Sequence[str],
                                  params: dict[str, float | str] | None = None) -> Graph:
    """One stop node reading the sensors a fitted ``GreedyMiserRegressor``'s trees use."""
    bought = [int(s) for s in np.flatnonzero(regressor.sensors_bought_)]
    columns = tuple(int(c) for c in regressor.features_used_)
    node = GraphNode(sensors=tuple(sensor_names[s] for s in bought), inputs=columns,
                     actions=(GraphAction("stop"),), model=RegressionTreeNode(regressor, columns))
    return Graph("", "n0", {"n0": node}, params=dict(params or {}), method="greedy-miser")
