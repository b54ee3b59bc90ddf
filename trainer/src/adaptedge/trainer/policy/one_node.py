"""The one-node graphs of the gate methods (ADAPT-GBRT, ADAPT-LIN, L1, Greedy Miser, the
confidence cascade): read the bought sensors, then stop with the LPC or escalate to the HPC.

``EstimatorNode`` puts a fitted gate estimator behind the ``NodeModel`` protocol: its
``gate_score`` (positive: escalate) becomes the action scores ``[-g, g]`` for (stop,
escalate), a tie stopping as the exported head does. ``validated`` scores a variant with the
one walk on outputs computed once per fitted model, so a threshold sweep never re-runs trees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.action_head import ActionHead
from adaptedge.trainer.methods.gating import CostModel
from adaptedge.trainer.policy.frontier import pareto_frontier
from adaptedge.trainer.policy.graph import FloatArray, Graph, GraphAction, GraphNode, Metrics
from adaptedge.trainer.policy.walk import CostTable, IntArray, walk

ROOT = "n0"


@dataclass(frozen=True)
class EstimatorNode:
    """A fitted gate estimator (``predict_proba``, ``gate_score`` and ``to_onnx`` on full
    feature rows) seen through the node's input columns."""

    estimator: Any
    inputs: tuple[int, ...]
    n_features: int
    gated: bool

    def _rows(self, X: NDArray[np.floating]) -> NDArray[np.float32]:
        full = np.zeros((len(X), self.n_features), dtype=np.float32)
        full[:, list(self.inputs)] = X
        return full

    def proba(self, X: NDArray[np.floating]) -> FloatArray:
        out: FloatArray = np.asarray(self.estimator.predict_proba(self._rows(X)), np.float64)
        return out

    def action_scores(self, X: NDArray[np.floating]) -> FloatArray | None:
        if not self.gated:
            return None
        return gate_actions(np.asarray(self.estimator.gate_score(self._rows(X)), np.float64))

    def to_onnx(self) -> bytes:
        data: bytes = self.estimator.to_onnx()
        return data

    def to_onnx_shared(self) -> tuple[bytes, ActionHead] | None:
        """A gated estimator's model shared by all its thresholds and its action head
        (``protocol.action_head``), when it has them (ADAPT-GBRT); else None."""
        shared = getattr(self.estimator, "to_onnx_shared", None)
        if not self.gated or shared is None:
            return None
        out: tuple[bytes, ActionHead] = shared()
        return out


def gate_actions(gate_score: FloatArray) -> FloatArray:
    """(stop, escalate) scores ``[-g, g]``: the first argmax escalates exactly when g > 0."""
    return np.stack([-gate_score, gate_score], axis=1)


def one_node_graph(name: str, method: str, cost_model: CostModel, estimator: Any, gated: bool,
                   params: dict[str, float | str]) -> Graph:
    """The graph reading ``estimator.sensors_bought_`` once and then stopping (or escalating
    when ``gated``)."""
    bought = estimator.sensors_bought_
    inputs = cost_model.node_columns(bought)
    actions = ((GraphAction("stop"), GraphAction("escalate")) if gated
               else (GraphAction("stop"),))
    node = GraphNode(sensors=cost_model.node_sensor_names(bought), inputs=inputs,
                     actions=actions,
                     model=EstimatorNode(estimator, inputs, len(cost_model.feature_sensor), gated))
    return Graph(name, ROOT, {ROOT: node}, params=params, method=method)


def validated(graph: Graph, dataset: Any, hpc: Any, cost_model: CostModel, proba_val: FloatArray,
              gate_val: FloatArray | None) -> Graph:
    """``graph`` with its validation metrics from the walk, given the node's probabilities and
    gate scores on the validation rows (computed once per fitted model)."""
    return graph.with_validation(validation_metrics(
        graph, dataset.X_val, dataset.y_val, hpc.proba_val, cost_model.table(), proba_val,
        gate_val))


def validation_metrics(graph: Graph, X_val: NDArray[np.floating], y_val: NDArray[np.integer],
                       hpc_proba_val: FloatArray, table: CostTable, proba_val: FloatArray,
                       gate_val: FloatArray | None) -> Metrics:
    """``validated``'s metrics, from the validation rows and the cost table themselves (what a
    sweep's worker holds)."""
    scores = None if gate_val is None else gate_actions(gate_val)

    def outputs(nid: str, node: GraphNode, rows: IntArray) -> tuple[FloatArray, FloatArray | None]:
        return proba_val[rows], None if scores is None else scores[rows]

    return walk(graph, X_val, hpc_proba_val, table, outputs).metrics(y_val)


def named(method: str, params: dict[str, float | str]) -> str:
    return method + "-" + "-".join(f"{k}{v:g}" if isinstance(v, float) else f"{k}{v}"
                                   for k, v in params.items())


def threshold_sweep(method: str, models: Sequence[Any], grid: Sequence[float], dataset: Any,
                    hpc: Any, cost_model: CostModel, names: Sequence[str]) -> list[Graph]:
    """Each model at each ``with_threshold(t)`` of ``grid``, validated; the validation front."""
    out = []
    for model in models:
        if not model.sensors_bought_.any():
            continue
        proba_val = np.asarray(model.predict_proba(dataset.X_val), dtype=np.float64)
        for t in grid:
            variant = model.with_threshold(t)
            params: dict[str, float | str] = {n: float(getattr(variant, n)) for n in names}
            graph = one_node_graph(named(method, params), method, cost_model, variant, True,
                                   params)
            out.append(validated(graph, dataset, hpc, cost_model, proba_val,
                                 variant.gate_score(dataset.X_val)))
    return pareto_frontier(out)

