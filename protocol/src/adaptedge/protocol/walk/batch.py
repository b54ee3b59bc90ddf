"""The batched driver of the walk: every row of a batch of fully measured rows, one model call
per node visit (no sensor fails).

Every row starts at the root, holding its sensors in listed order; nodes run in the graph's
``order`` (topological: a row is routed before its next node runs), each once on all the rows
there; each row takes ``step.choose_rows``'s action (the first within the node's tie band of
the best score); a move reads the target's sensors not held yet, in the target's listed order;
``stop`` and ``escalate`` end the walk at that node (a regression walk: the node's ``value``
is its answer, carried as one probability column and given per row as ``BatchWalk.values``). A node with a ``compute`` cost charges it
to every row that visits it (``BatchWalk.compute``). Scores and probabilities are taken in the
walk's ``dtype`` (float32: what onnxruntime gives and the device decides on; float64: the
trainer's models).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.action_head import BASIS_OUTPUT, apply_head
from adaptedge.protocol.costs import visit_columns
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import ACTION_OUTPUT, Manifest
from adaptedge.protocol.policy_graph import PolicyNode
from adaptedge.protocol.walk.graph import ESCALATE, MOVE, STOP, WalkGraph, WalkNode, compile_graph
from adaptedge.protocol.walk.step import choose_rows, tie_margin

M = TypeVar("M")
Floats = npt.NDArray[np.floating[Any]]
IntArray = npt.NDArray[np.int64]
RunRows = Callable[[WalkNode[M], IntArray], tuple[Floats, Floats | None]]
"""(node, rows there) -> the node model's probabilities (a regression node: its value, [n, 1])
and, for a node with several actions, its action scores (None: take the first action) on
those rows."""


@dataclass(frozen=True)
class BatchWalk:
    """Where each row's walk ended, and how it got there."""

    node_ids: tuple[str, ...]
    """Nodes in the walk's order; ``final`` indexes them."""
    final: IntArray
    kind: npt.NDArray[np.int8]
    """``STOP`` or ``ESCALATE`` per row."""
    probabilities: Floats
    """The final node's probabilities per row (its local answer), in the walk's dtype."""
    trail: IntArray
    """Index into ``trails`` per row."""
    trails: tuple[tuple[int, ...], ...]
    """Sensor indices in the order read (escalation's HPC sensors not included)."""
    visited: IntArray
    sensor_bits: tuple[int, ...]
    """Per node (``node_ids`` order): bit i set = sensor i held (what a row ending there read)."""
    visits: dict[str, tuple[IntArray, IntArray]]
    """Node id -> the rows that visited it (ascending) and the action index each took."""
    compute: npt.NDArray[np.float64] | None = None
    """[N, K] the summed ``visit_cost`` rows of the nodes each row visited; None when no node
    has one."""
    margin: npt.NDArray[np.float64] | None = None
    """With ``margins``: per row, the least ``step.tie_margin`` over the nodes it chose at
    and, if it stopped, the gap between its top two probabilities (inf: nothing chosen)."""
    regression: bool = False
    """The nodes answer a value (``values``), not class probabilities."""

    @property
    def values(self) -> Floats:
        """A regression walk's answer per row: the final node's value, in the walk's dtype."""
        if not self.regression:
            raise ValueError("a classification walk has probabilities and labels, not values")
        return self.probabilities[:, 0]

    @property
    def local_label(self) -> IntArray:
        """The first argmax of the final node's probabilities."""
        return np.asarray(self.probabilities.argmax(axis=1), dtype=np.int64)

    @property
    def escalated(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.kind == ESCALATE, dtype=bool)

    def read_mask(self, n_sensors: int) -> npt.NDArray[np.bool_]:
        """[N, n_sensors]: the sensors each row read on its walk."""
        bits = np.array([[b >> s & 1 for s in range(n_sensors)] for b in self.sensor_bits],
                        dtype=bool).reshape(len(self.sensor_bits), n_sensors)
        read: npt.NDArray[np.bool_] = bits[self.final]
        return read


@dataclass
class _State:
    """The walk's per-row arrays while it runs."""

    at: IntArray
    kind: npt.NDArray[np.int8]
    proba: Floats
    trail: IntArray
    trails: list[tuple[int, ...]]
    trail_ids: dict[tuple[int, ...], int]


def walk_batch(graph: WalkGraph[M], n_rows: int, n_classes: int, run: RunRows[M], *,
               dtype: type[np.floating[Any]] = np.float32,
               visit_cost: Mapping[str, npt.NDArray[np.float64]] | None = None,
               margins: bool = False, regression: bool = False) -> BatchWalk:
    """Walk ``graph`` on ``n_rows`` rows in one batch (``run`` gives each node's outputs);
    ``visit_cost``: node id -> the cost row one visit charges (``protocol.costs.visit_columns``);
    ``regression``: each node gives its value as ``n_classes`` = 1 column."""
    if regression and n_classes != 1:
        raise ValueError(f"a regression walk takes one value column, not {n_classes}")
    ids = graph.order
    position = {node_id: k for k, node_id in enumerate(ids)}
    root = graph.root
    s = _State(at=np.full(n_rows, position[root.id], dtype=np.int64),
               kind=np.full(n_rows, -1, dtype=np.int8),
               proba=np.zeros((n_rows, n_classes), dtype=dtype),
               trail=np.zeros(n_rows, dtype=np.int64), trails=[root.sensors],
               trail_ids={root.sensors: 0})
    visited = np.zeros(n_rows, dtype=np.int64)
    costs = visit_cost or {}
    width = len(next(iter(costs.values()))) if costs else 0
    compute = np.zeros((n_rows, width)) if costs else None
    margin = np.full(n_rows, np.inf) if margins else None
    visits: dict[str, tuple[IntArray, IntArray]] = {}
    for k, node_id in enumerate(ids):
        rows = np.flatnonzero(s.at == k) if k == 0 else np.flatnonzero((s.at == k) & (s.kind < 0))
        if not rows.size:
            continue
        node = graph.nodes[node_id]
        visited[rows] += 1
        if compute is not None and node_id in costs:
            compute[rows] += costs[node_id]
        p, scores = run(node, rows)
        p = np.asarray(p, dtype=dtype)
        if node.single or scores is None:
            choice = np.zeros(len(rows), dtype=np.int64)
        else:
            scores = np.asarray(scores, dtype=dtype)
            choice = choose_rows(scores, node.tie_band)
            if margin is not None:
                margin[rows] = np.minimum(margin[rows], tie_margin(scores, node.tie_band))
        visits[node_id] = (rows, choice)
        _take(node, k, rows, choice, p, s, position)
    if (s.kind < 0).any():
        stuck = sorted({ids[k] for k in s.at[s.kind < 0].tolist()})
        raise BundleError(f"{int((s.kind < 0).sum())} rows never reached a stop or escalate "
                          f"action (they ended at {stuck}); every walk must end in one")
    if margin is not None and n_classes > 1:
        stopped = np.flatnonzero(s.kind == STOP)
        top2 = np.sort(s.proba[stopped], axis=1)[:, -2:]
        margin[stopped] = np.minimum(margin[stopped], top2[:, 1] - top2[:, 0])
    return BatchWalk(node_ids=ids, final=s.at, kind=s.kind, probabilities=s.proba,
                     trail=s.trail, trails=tuple(s.trails), visited=visited,
                     sensor_bits=tuple(graph.nodes[i].sensor_bits for i in ids), visits=visits,
                     compute=compute, margin=margin, regression=regression)


def _take(node: WalkNode[M], k: int, rows: IntArray, choice: IntArray, p: Floats,
          s: _State, position: Mapping[str, int]) -> None:
    """Rows ``rows`` at ``node`` (``k`` in the order) take their ``choice``: a stop or an
    escalation ends there with probabilities ``p``, a move goes on to its node."""
    ends = np.array([-1 if a.kind == MOVE else a.kind for a in node.actions], dtype=np.int8)
    if len(rows) == len(s.at):  # a moved row's probabilities are overwritten at its final node
        s.kind[:] = ends[choice]
        s.proba[:] = p
    else:
        s.kind[rows] = ends[choice]
        s.proba[rows] = p
    for a, action in enumerate(node.actions):
        if action.kind != MOVE:
            continue
        sel = rows[choice == a]
        if sel.size:
            assert action.next is not None
            _move(sel, s, action.new_sensors)
            s.at[sel] = position[action.next.id]


def _move(sel: IntArray, s: _State, new: tuple[int, ...]) -> None:
    """Rows ``sel`` read ``new`` (in order) next: extend each one's trail."""
    old = s.trail[sel]
    for t in np.unique(old).tolist():  # a few distinct trails per node
        path = s.trails[t] + new
        if path not in s.trail_ids:
            s.trail_ids[path] = len(s.trails)
            s.trails.append(path)
        s.trail[sel[old == t]] = s.trail_ids[path]


RunFile = Callable[[str, npt.NDArray[np.float32], str | None], tuple[Floats, Floats | None]]
"""(model file, rows of its input columns, the scores' output wanted or None) ->
(probabilities, that output); for a regression bundle the first is the model's ``value``
output, [n, 1]. The output is ``action_scores``, or ``action_basis`` for a node with an action
head (``scores_output``; ``walk_manifest`` applies the head)."""


def scores_output(node: WalkNode[Any]) -> str | None:
    """The model output a node's walk needs besides its answer: None (one action),
    ``action_basis`` (an action head) or ``action_scores``."""
    if node.single:
        return None
    return ACTION_OUTPUT if node.head is None else BASIS_OUTPUT


def node_scores(node: WalkNode[Any], out: Floats | None) -> Floats | None:
    """The node's action scores from what ``scores_output`` asked for (its head applied)."""
    if out is None or node.head is None:
        return out
    return apply_head(node.head, out)


def walk_manifest(manifest: Manifest, policy: str, x: npt.NDArray[np.float32],
                  run: RunFile) -> BatchWalk:
    """``walk_batch`` of a bundle's ``policy`` on the full feature rows ``x`` in float32 (what
    onnxruntime gives and the device decides on), ``run`` calling each node's model file; each
    visit charges its node's evaluation cost (``protocol.costs.visit_columns``)."""
    graph = manifest.policies[policy]

    def file_of(node_id: str, node: PolicyNode) -> str:
        return node.model.file

    compiled = compile_graph(graph, [s.name for s in manifest.sensors],
                             len(manifest.feature_names), file_of)

    def run_rows(node: WalkNode[str], rows: IntArray) -> tuple[Floats, Floats | None]:
        answer, out = run(node.model, gather(x, rows, node.inputs), scores_output(node))
        return answer, node_scores(node, out)

    regression = manifest.is_regression
    return walk_batch(compiled, len(x), 1 if regression else len(manifest.classes), run_rows,
                      dtype=np.float32, visit_cost=visit_columns(graph, manifest.cost_weights),
                      regression=regression)


def gather(x: Floats, rows: IntArray, cols: npt.NDArray[np.intp]) -> npt.NDArray[np.float32]:
    """``x[rows][:, cols]`` as one C-contiguous float32 copy (none when it is all of ``x``):
    a node's model input for ``RunRows``."""
    if len(rows) == len(x):
        if len(cols) == x.shape[1] and (cols == np.arange(len(cols))).all():
            return np.ascontiguousarray(x, dtype=np.float32)
        return np.ascontiguousarray(x[:, cols], dtype=np.float32)
    picked = x.take(rows, axis=0)  # rows first: one contiguous gather, then the columns
    if len(cols) == x.shape[1] and (cols == np.arange(len(cols))).all():
        return np.ascontiguousarray(picked, dtype=np.float32)
    return np.ascontiguousarray(picked.take(cols, axis=1), dtype=np.float32)
