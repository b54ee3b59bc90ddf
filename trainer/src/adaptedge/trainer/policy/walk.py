"""The one float64 walk of a ``Graph`` over a split, batched by node: every method's
validation metrics (the float32 walk over the exported ONNX is ``trainer.policy.oracle``).

Rows start at the root. Nodes run in topological order, each ONCE on all the rows that reach
it: entering a node reads its sensors not read yet; the node takes, per row, the first action
within its ``tie_band`` of the best score (a one-action node needs none): ``stop`` answers
with the node's classifier, ``escalate`` with the HPC after reading the HPC's unread sensors
and paying the link, ``acquire`` and ``route`` move on. Costs are ``protocol.costs``'s (a
node with a ``compute`` cost charges it on every visit).

Node outputs come from the node models, or from ``outputs`` (e.g. out-of-fold probabilities,
or one model's outputs shared by many threshold variants), so a sweep never re-runs a model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.costs import at_sizes, compute_cost, decision_costs
from adaptedge.protocol.manifest import CostWeights
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

    def metrics(self, y: NDArray[np.integer]) -> Metrics:
        return Metrics(accuracy=float((self.answer == y).mean()), cost=float(self.cost.mean()),
                       escalation_rate=float(self.escalated.mean()),
                       avg_sensors_read=float(self.read.sum(axis=1).mean()))


def model_outputs(X: NDArray[np.floating]) -> NodeOutputs:
    """Outputs computed by the node models on ``X`` (full feature rows)."""

    def outputs(nid: str, node: GraphNode, rows: IntArray) -> tuple[FloatArray, FloatArray | None]:
        x = np.asarray(X, dtype=np.float32)[np.ix_(rows, np.asarray(node.inputs, dtype=np.int64))]
        scores = node.model.action_scores(x) if len(node.actions) > 1 else None
        return node.model.proba(x), scores

    return outputs


def choose(scores: FloatArray, band: float) -> tuple[IntArray, FloatArray]:
    """Each row's action (the first within ``band`` of the best) and its margin."""
    top = scores.max(axis=1, keepdims=True)
    edge = top - band
    choice: IntArray = (scores >= edge).argmax(axis=1).astype(np.int64)
    if band > 0:
        margin: FloatArray = np.abs(scores - edge).min(axis=1)
    else:
        ranked = np.sort(scores, axis=1)
        margin = ranked[:, -1] - ranked[:, -2]
    return choice, margin


def walk(graph: Graph, X: NDArray[np.floating], hpc_proba: NDArray[np.floating],
         table: CostTable, outputs: NodeOutputs | None = None,
         sizes: NDArray[np.floating] | None = None) -> WalkResult:
    """Walk every row of ``X`` (full feature rows; ``hpc_proba``: the HPC's answers); with
    ``sizes`` each row pays its own size's sensor costs (``CostTable.size_poly``)."""
    n = len(hpc_proba)
    get = outputs or model_outputs(X)
    answer = np.full(n, -1, dtype=np.int64)
    escalated = np.zeros(n, dtype=bool)
    read = np.zeros((n, len(table.sensor_names)), dtype=bool)
    margin = np.full(n, np.inf)
    actions: dict[str, IntArray] = {}
    visits: dict[str, IntArray] = {}
    arriving: dict[str, list[IntArray]] = {graph.root: [np.arange(n, dtype=np.int64)]}
    hpc_answer = np.asarray(hpc_proba).argmax(axis=1)
    compute = np.zeros(n)
    for nid in graph.topological_order():
        if nid not in arriving:
            continue
        rows = np.concatenate(arriving.pop(nid))
        node = graph.nodes[nid]
        if node.sensors:
            read[np.ix_(rows, table.index(node.sensors))] = True
        proba, scores = get(nid, node, rows)
        compute[rows] += table.visit_cost(node)
        if len(node.actions) == 1 or scores is None:
            choice = np.zeros(len(rows), dtype=np.int64)
        else:
            choice, node_margin = choose(scores, node.tie_band)
            margin[rows] = np.minimum(margin[rows], node_margin)
        actions[nid], visits[nid] = choice, rows
        for index, action in enumerate(node.actions):
            mask = choice == index
            sel = rows[mask]
            if not sel.size:
                continue
            if action.kind == "stop":
                answer[sel] = proba[mask].argmax(axis=1)
                if proba.shape[1] > 1:
                    top2 = np.sort(proba[mask], axis=1)[:, -2:]
                    margin[sel] = np.minimum(margin[sel], top2[:, 1] - top2[:, 0])
            elif action.kind == "escalate":
                escalated[sel] = True
                answer[sel] = hpc_answer[sel]
                read[np.ix_(sel, np.flatnonzero(table.hpc_sensors))] = True
            else:
                assert action.next is not None
                arriving.setdefault(action.next, []).append(sel)
    per_sensor = table.item_costs(sizes)
    cost = decision_costs(read, escalated, per_sensor, table.link_cost)
    if cost.ndim == 2:
        cost = cost[:, 0]
    cost = cost + compute
    return WalkResult(answer, escalated, read, cost, actions, visits, margin)
