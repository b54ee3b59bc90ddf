"""The walk of a policy graph over a batch of fully measured rows: one model call per node visit.

numpy only (the caller runs the models, e.g. with onnxruntime): the simulator's batched replay
and the trainer's float32 ONNX oracle both walk batches with ``walk_batch``. The rules are
``edge.walk``'s on the replay path (no sensor fails): every row starts at the root, holding its
sensors in listed order; nodes run in topological order (the manifest refuses cycles, so a row
is routed before its next node runs); a node with several actions takes the first highest
``action_scores`` entry; a move (``acquire``/``route``) reads the target's sensors not held yet,
in the target's listed order; ``stop`` and ``escalate`` end the walk at that node. A node with
a ``compute`` cost charges it to every row that visits it (``BatchWalk.compute``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.costs import COST_COLUMNS, visit_columns
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.policy_graph import MOVE_KINDS, PolicyGraph, topological_order

F32 = npt.NDArray[np.float32]
RunNode = Callable[[str, F32, bool], tuple[F32, F32 | None]]
"""(model file, rows of its input columns, scores wanted) -> (probabilities, action scores)."""
STOP, ESCALATE = 0, 2


@dataclass(frozen=True)
class BatchWalk:
    """Where each row's walk ended, and how it got there."""

    node_ids: tuple[str, ...]
    """Nodes in topological order; ``final`` indexes them."""
    final: npt.NDArray[np.int64]
    kind: npt.NDArray[np.int8]
    """``STOP`` or ``ESCALATE`` per row."""
    probabilities: F32
    """The final node's probabilities per row (its local answer)."""
    trail: npt.NDArray[np.int64]
    """Index into ``trails`` per row."""
    trails: tuple[tuple[int, ...], ...]
    """Sensor indices in the order read (escalation's HPC sensors not included)."""
    visited: npt.NDArray[np.int64]
    sensor_bits: tuple[int, ...]
    """Per node (``node_ids`` order): bit i set = sensor i held (what a row ending there read)."""
    compute: npt.NDArray[np.float64] | None = None
    """[N, 5] (``protocol.costs.COST_COLUMNS``) the evaluation costs of the nodes each row
    visited; None when no node of the graph has one."""

    @property
    def local_label(self) -> npt.NDArray[np.int64]:
        """The first argmax of the final node's probabilities."""
        return np.asarray(self.probabilities.argmax(axis=1), dtype=np.int64)

    def read_mask(self, n_sensors: int) -> npt.NDArray[np.bool_]:
        """[N, n_sensors]: the sensors each row read on its walk."""
        bits = np.array([[b >> s & 1 for s in range(n_sensors)] for b in self.sensor_bits],
                        dtype=bool).reshape(len(self.sensor_bits), n_sensors)
        return bits[self.final]


def walk_batch(manifest: Manifest, graph: PolicyGraph, x: F32, run: RunNode) -> BatchWalk:
    """Walk ``graph`` on every row of ``x`` (full feature rows, float32) in one batch."""
    index = {s.name: i for i, s in enumerate(manifest.sensors)}
    ids = tuple(topological_order(graph))
    position = {node_id: k for k, node_id in enumerate(ids)}
    held = [tuple(index[s] for s in graph.nodes[i].sensors) for i in ids]
    bits = tuple(sum(1 << s for s in h) for h in held)
    n = len(x)
    at = np.full(n, position[graph.root], dtype=np.int64)
    kind = np.full(n, -1, dtype=np.int8)
    proba = np.zeros((n, len(manifest.classes)), dtype=np.float32)
    visited = np.zeros(n, dtype=np.int64)
    trails: list[tuple[int, ...]] = [held[position[graph.root]]]
    trail_ids = {trails[0]: 0}
    trail = np.zeros(n, dtype=np.int64)
    visit_cost = visit_columns(graph, manifest.cost_weights)
    compute = np.zeros((n, len(COST_COLUMNS))) if visit_cost else None
    for k, node_id in enumerate(ids):
        rows = np.flatnonzero(at == k) if k == 0 else np.flatnonzero((at == k) & (kind < 0))
        if not rows.size:
            continue
        node = graph.nodes[node_id]
        visited[rows] += 1
        if compute is not None and node_id in visit_cost:
            compute[rows] += visit_cost[node_id]
        many = len(node.actions) > 1
        cols = np.asarray(node.model.inputs, dtype=np.intp)
        p, scores = run(node.model.file, _columns(x, rows, cols), many)
        choice = (np.argmax(scores, axis=1) if many and scores is not None
                  else np.zeros(len(rows), dtype=np.intp))
        ends = np.array([-1 if a.kind in MOVE_KINDS else STOP if a.kind == "stop" else ESCALATE
                         for a in node.actions], dtype=np.int8)
        everyone = len(rows) == n
        if everyone:  # a moved row's probabilities are overwritten at its final node
            kind[:] = ends[choice]
            proba[:] = p
        else:
            kind[rows] = ends[choice]
            proba[rows] = p
        for a, action in enumerate(node.actions):
            if action.kind not in MOVE_KINDS:
                continue
            sel = rows[choice == a]
            if sel.size:
                assert action.next is not None
                _move(sel, trail, trails, trail_ids,
                      tuple(s for s in held[position[action.next]] if not bits[k] >> s & 1))
                at[sel] = position[action.next]
    if (kind < 0).any():
        raise RuntimeError(f"{int((kind < 0).sum())} rows never reached a stop or escalate "
                           "action")
    return BatchWalk(node_ids=ids, final=at, kind=kind, probabilities=proba, trail=trail,
                     trails=tuple(trails), visited=visited, sensor_bits=bits, compute=compute)


def _columns(x: F32, rows: npt.NDArray[np.intp], cols: npt.NDArray[np.intp]) -> F32:
    """``x[rows][:, cols]`` as one C-contiguous float32 copy (none when it is all of ``x``)."""
    if len(rows) == len(x):
        if len(cols) == x.shape[1] and (cols == np.arange(len(cols))).all():
            return np.ascontiguousarray(x, dtype=np.float32)
        return np.ascontiguousarray(x[:, cols], dtype=np.float32)
    picked = x.take(rows, axis=0)  # rows first: one contiguous gather, then the columns
    if len(cols) == x.shape[1] and (cols == np.arange(len(cols))).all():
        return np.ascontiguousarray(picked, dtype=np.float32)
    return np.ascontiguousarray(picked.take(cols, axis=1), dtype=np.float32)


def _move(sel: npt.NDArray[np.intp], trail: npt.NDArray[np.int64],
          trails: list[tuple[int, ...]], trail_ids: dict[tuple[int, ...], int],
          new: tuple[int, ...]) -> None:
    """Rows ``sel`` read ``new`` (in order) next: extend each one's trail."""
    old = trail[sel]
    for t in np.unique(old).tolist():  # a few distinct trails per node
        path = trails[t] + new
        if path not in trail_ids:
            trail_ids[path] = len(trails)
            trails.append(path)
        trail[sel[old == t]] = trail_ids[path]
