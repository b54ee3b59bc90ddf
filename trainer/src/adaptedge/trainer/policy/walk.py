"""The trainer's float64 walk of a ``Graph`` over a split: every method's validation metrics
(the float32 walk over the exported ONNX is ``trainer.policy.oracle``).

The rules are ``protocol.walk``'s batched driver in float64, the graph's nodes bound to their
``NodeModel`` and each node's ``tie_band`` kept (the first action within it of the best score).
Here the escalations are answered by the HPC's probabilities and the rows pay
``protocol.costs``'s training scalar (a node with a ``compute`` cost charges it on every
visit). Node outputs come from the node models, or from ``outputs`` (e.g. out-of-fold
probabilities, or one model's outputs shared by many threshold variants), so a sweep never
re-runs a model. A row with missing cells (NaN: a sensor not measured) is walked as the device
walks it, the sensor's read failing (``trainer.policy.failed_reads``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.costs import at_sizes, compute_cost, decision_costs
from adaptedge.protocol.manifest import CostWeights
from adaptedge.protocol.policy_graph import ModelRef, PolicyGraph, PolicyNode
from adaptedge.protocol.walk import (
    BatchWalk,
    WalkGraph,
    WalkNode,
    compile_graph,
    walk_batch,
)
from adaptedge.trainer.policy.failed_reads import (
    bits_mask,
    failed_sensors,
    graph_bits,
    patch_batch,
    walk_live_rows,
    zero_filled,
)
from adaptedge.trainer.policy.graph import FloatArray, Graph, GraphNode, Metrics

IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
NodeOutputs = Callable[[str, GraphNode, IntArray], tuple[FloatArray, FloatArray | None]]
"""(node id, node, rows) -> the node's probabilities and action scores on those rows."""


@dataclass(frozen=True)
class CostTable:
    """The training scalar cost of each sensor and of the link, and the HPC's sensors."""

    sensor_names: tuple[str, ...]
    sensor_costs: FloatArray
    link_cost: float
    hpc_sensors: BoolArray
    size_poly: FloatArray | None = None
    """[S, D] each sensor's scalar cost as coefficients in the item's size (None: constant)."""
    weights: CostWeights | None = None
    """The training scalar's weights: price a node's ``compute`` (needed only if one has)."""
    sensor_columns: tuple[tuple[int, ...], ...] | None = None
    """Each sensor's feature columns: a row with a NaN in one fails that sensor's read
    (``trainer.policy.failed_reads``); needed only for rows with missing cells."""

    def visit_cost(self, node: GraphNode) -> float:
        """The scalar a visit of ``node`` pays to run its model (0 without ``compute``)."""
        if node.compute is None:
            return 0.0
        if self.weights is None:
            raise ValueError("a node has a compute cost but the cost table has no weights; "
                             "build the table with weights= (DagProblem.cost_table does)")
        return compute_cost(node.compute, self.weights).scalar

    def item_costs(self, sizes: NDArray[np.floating] | None) -> FloatArray:
        """Sensor costs for ``decision_costs``: [S], or each item's own [N, S, 1]."""
        if sizes is None or self.size_poly is None:
            return self.sensor_costs
        return at_sizes(self.size_poly, sizes)[:, :, None]

    def index(self, names: Sequence[str]) -> IntArray:
        position = {n: i for i, n in enumerate(self.sensor_names)}
        try:
            return np.array([position[n] for n in names], dtype=np.int64)
        except KeyError as exc:
            raise ValueError(f"unknown sensor {exc.args[0]!r}; the cost table has "
                             f"{list(self.sensor_names)}") from None


@dataclass(frozen=True)
class WalkResult:
    answer: IntArray
    escalated: BoolArray
    read: BoolArray
    """[N, n_sensors]: which sensors each decision read (escalation's included)."""
    cost: FloatArray
    actions: dict[str, IntArray]
    """Node id -> the chosen action index of each row that visited it (``visits`` order)."""
    visits: dict[str, IntArray]
    """Node id -> the rows that visited it."""
    margin: FloatArray
    """[N]: how close each decision came to another outcome: the least action margin over the
    nodes it visited (distance of any score from the tie band's edge; without a band, the gap
    between the two best scores) and, if it stopped, the gap between its top two
    probabilities (inf where nothing was chosen). Float32 inference may differ from this
    walk only where the margin is within float32 noise."""
    local: FloatArray | None = None
    """[N, n_classes] the final node's probabilities (the local answer, escalated or not)."""

    def metrics(self, y: NDArray[np.integer]) -> Metrics:
        return Metrics(accuracy=float((self.answer == y).mean()), cost=float(self.cost.mean()),
                       escalation_rate=float(self.escalated.mean()),
                       avg_sensors_read=float(self.read.sum(axis=1).mean()))


def model_outputs(X: NDArray[np.floating]) -> NodeOutputs:
    """Outputs computed by the node models on ``X`` (full feature rows)."""

    def outputs(nid: str, node: GraphNode, rows: IntArray) -> tuple[FloatArray, FloatArray | None]:
        x = zero_filled(np.asarray(X, dtype=np.float32)[np.ix_(rows, np.asarray(node.inputs,
                                                                             dtype=np.int64))])
        scores = node.model.action_scores(x) if len(node.actions) > 1 else None
        return node.model.proba(x), scores

    return outputs


def walk(graph: Graph, X: NDArray[np.floating], hpc_proba: NDArray[np.floating],
         table: CostTable, outputs: NodeOutputs | None = None,
         sizes: NDArray[np.floating] | None = None) -> WalkResult:
    """Walk every row of ``X`` (full feature rows; ``hpc_proba``: the HPC's answers); with
    ``sizes`` each row pays its own size's sensor costs (``CostTable.size_poly``). A cycle or
    a sensor the table lacks raises ``ValueError``."""
    n = len(hpc_proba)
    get = outputs or model_outputs(X)
    order = graph.topological_order()  # refuses a cycle
    nodes = {nid: graph.nodes[nid] for nid in order}  # those the root reaches
    for node in nodes.values():
        table.index(node.sensors)  # names an unknown sensor
    policy = PolicyGraph(graph.root, {
        nid: PolicyNode(node.sensors, ModelRef(nid, node.inputs),
                        tuple(a.to_manifest() for a in node.actions), node.compute)
        for nid, node in nodes.items()})
    compiled = compile_graph(policy, table.sensor_names, np.shape(X)[-1],
                             lambda nid, _: nodes[nid], order=order,
                             tie_band={nid: node.tie_band for nid, node in nodes.items()})

    def run(node: WalkNode[GraphNode], rows: IntArray) -> tuple[FloatArray, FloatArray | None]:
        return get(node.id, node.model, rows)

    visit_cost = {nid: np.array([table.visit_cost(node)]) for nid, node in nodes.items()
                  if node.compute is not None}
    hpc = np.asarray(hpc_proba)
    result = walk_batch(compiled, n, hpc.shape[1], run, dtype=np.float64,
                        visit_cost=visit_cost, margins=True)
    escalated = result.escalated
    answer = np.where(escalated, hpc.argmax(axis=1), result.local_label).astype(np.int64)
    read = result.read_mask(len(table.sensor_names))
    read[escalated] |= table.hpc_sensors
    answer, read = _failed_reads(compiled, X, hpc, table, result, answer, read,
                                 visit_cost)
    escalated = result.escalated
    cost = decision_costs(read, escalated, table.item_costs(sizes), table.link_cost)
    if cost.ndim == 2:
        cost = cost[:, 0]
    if result.compute is not None:
        cost = cost + result.compute[:, 0]
    assert result.margin is not None
    actions = {nid: choice for nid, (_, choice) in result.visits.items()}
    visits = {nid: rows for nid, (rows, _) in result.visits.items()}
    return WalkResult(answer, escalated, read, cost, actions, visits, result.margin,
                      np.asarray(result.probabilities, dtype=np.float64))


def _failed_reads(graph: WalkGraph[GraphNode], X: NDArray[np.floating], hpc: FloatArray,
                  table: CostTable, result: BatchWalk,
                  answer: IntArray, read: BoolArray,
                  visit_cost: dict[str, FloatArray]) -> tuple[IntArray, BoolArray]:
    """``answer`` and ``read`` with the rows that hold missing cells walked as on a device;
    ``result`` is patched in place for them (``trainer.policy.failed_reads``). Their node
    outputs come from the node models on the rows with failed columns at 0, as on a device
    (not from given ``outputs``)."""
    if np.isfinite(np.asarray(X)).all():
        return answer, read
    if table.sensor_columns is None:
        raise ValueError("rows with missing cells need the cost table's sensor_columns")
    failed = failed_sensors(X, table.sensor_columns)
    hpc_bits = int(sum(1 << int(s) for s in np.flatnonzero(table.hpc_sensors)))
    # a row failing no sensor any node holds walks as in the batch; the HPC may refuse it
    refused = result.escalated & (failed & hpc_bits != 0)
    answer[refused] = result.local_label[refused]
    read[refused] &= ~bits_mask(failed[refused], read.shape[1])
    rows = np.flatnonzero(failed & graph_bits(graph) != 0).astype(np.int64)
    if not rows.size:
        return answer, read
    zeros = model_outputs(X)  # the models on the rows as the device holds them (failed at 0)

    def run_live(node: WalkNode[GraphNode], at: IntArray) -> tuple[FloatArray, FloatArray | None]:
        return zeros(node.id, node.model, at)

    live = walk_live_rows(graph, rows, failed, run_live, hpc.shape[1], table.sensor_names,
                          tuple(int(s) for s in np.flatnonzero(table.hpc_sensors)))
    by_hpc = live.hpc_answers(failed, hpc_bits)
    answer[rows] = np.where(by_hpc, hpc[rows].argmax(axis=1), live.local.argmax(axis=1))
    read[rows] = bits_mask(live.read_bits, read.shape[1])
    patch_batch(result, live, visit_cost)
    return answer, read
