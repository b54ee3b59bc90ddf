"""Rows with missing cells walked as a device walks them: a sensor with a NaN column is a
failed read.

Training data may leave a sensor unmeasured on a row (NaN cells, ``load_dataset(missing=
True)``); the edge runtime treats such a sensor as a failed read (``EdgeRuntime.predict_row``).
So that a bundle's metrics are the device's, the batched walks (the trainer's float64 walk,
the float32 ONNX oracle) hand the rows that would read a failed sensor to the device's own
driver, ``protocol.walk.walk_live``: the walk stays where a read failed and takes the best
action still possible; a root whose sensors failed escalates (its scores are not trusted);
nothing possible answers locally (degraded). An escalation reads the HPC's sensors too, and
the cloud refuses a row lacking one of them (``cloud.service.inference``): the device then
answers with its local probabilities (degraded), having paid the link.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.walk import (
    ESCALATE,
    STOP,
    BatchWalk,
    RunRows,
    WalkGraph,
    WalkNode,
    walk_live,
)

M = TypeVar("M")
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


def failed_sensors(X: NDArray[np.floating[Any]], sensor_columns: Sequence[Sequence[int]]
                   ) -> IntArray:
    """Per row, bit ``s`` set when a column of sensor ``s`` is not finite (a failed read)."""
    bad = ~np.isfinite(np.asarray(X))
    out = np.zeros(len(bad), dtype=np.int64)
    if not bad.any():
        return out
    for s, cols in enumerate(sensor_columns):
        out |= bad[:, list(cols)].any(axis=1).astype(np.int64) << s
    return out


def graph_bits(graph: WalkGraph[M]) -> int:
    """Every sensor some node of ``graph`` holds."""
    bits = 0
    for node in graph.nodes.values():
        bits |= node.sensor_bits
    return bits


def zero_filled(X: NDArray[np.floating[Any]]) -> NDArray[np.floating[Any]]:
    """``X`` with non-finite cells at 0, as the device holds a failed sensor's columns."""
    x = np.asarray(X)
    return x if np.isfinite(x).all() else np.where(np.isfinite(x), x, 0).astype(x.dtype)


@dataclass(frozen=True)
class LiveRows:
    """The rows walked one by one, and where each one's walk ended."""

    rows: IntArray
    kind: NDArray[np.int8]
    """``STOP``, ``ESCALATE`` or -1 (nothing possible: a degraded local answer)."""
    local: NDArray[np.floating[Any]]
    """[n, C] the final node's probabilities."""
    read_bits: IntArray
    """Sensors read (an escalation's HPC sensors included), failed ones not."""
    final: list[str]
    nodes: list[list[str]]
    """Node ids visited, in order."""
    taken: dict[str, list[tuple[int, int]]]
    """Node id -> (row, action index) of each row that left the node by an action."""

    def hpc_answers(self, failed: IntArray, hpc_bits: int) -> BoolArray:
        """Which of ``rows`` the cloud answers: escalated with every HPC sensor read."""
        out: BoolArray = (self.kind == ESCALATE) & (failed[self.rows] & hpc_bits == 0)
        return out


def walk_live_rows(graph: WalkGraph[M], rows: IntArray, failed: IntArray, run: RunRows[M],
                   n_classes: int, names: tuple[str, ...], hpc_sensors: Sequence[int]
                   ) -> LiveRows:
    """``rows`` walked one at a time by ``walk_live``, sensor ``s`` of row ``i`` failing when
    ``failed[i]`` has bit ``s``; ``run`` gives a node's outputs on rows (called once per node
    on all of ``rows``, which should hold failed columns at 0: ``zero_filled``)."""
    cache: dict[str, tuple[NDArray[Any], NDArray[Any] | None]] = {}
    where = {int(r): j for j, r in enumerate(rows.tolist())}

    def outputs(node: WalkNode[M]) -> tuple[NDArray[Any], NDArray[Any] | None]:
        if node.id not in cache:
            cache[node.id] = run(node, rows)
        return cache[node.id]

    n = len(rows)
    kind = np.full(n, -1, dtype=np.int8)
    local = np.zeros((n, n_classes))
    read_bits = np.zeros(n, dtype=np.int64)
    final: list[str] = []
    nodes: list[list[str]] = []
    taken: dict[str, list[tuple[int, int]]] = {}
    for j, row in enumerate(rows.tolist()):
        bits = int(failed[row])

        def score(node: WalkNode[M], i: int) -> NDArray[Any]:
            scores = outputs(node)[1]
            return np.zeros(1) if scores is None else ranked(scores[i], node.tie_band)

        def read(s: int, bits: int = bits) -> str | None:
            return "not measured (NaN)" if bits >> s & 1 else None

        end, action, trail = walk_live(graph.root, where[row], score, read, names)
        if action is not None and action.kind == ESCALATE:
            trail.read(hpc_sensors, read, stop_at_failure=False)
        kind[j] = -1 if action is None else action.kind
        local[j] = outputs(end)[0][j]
        read_bits[j] = trail.read_bits
        final.append(end.id)
        nodes.append(list(trail.nodes))
        _record(graph, trail.nodes, action, row, taken)
    assert STOP != -1 and ESCALATE != -1
    return LiveRows(rows, kind, local, read_bits, final, nodes, taken)


def ranked(scores: NDArray[Any], band: float) -> NDArray[Any]:
    """A node's scores as its exported model gives them: with a tie band, ``n - j`` for the
    actions within it of the best and 0 for the others (``export.heads``), so that after a
    failed read the walk falls back in listed order, as on the device."""
    s = np.asarray(scores, dtype=np.float64)
    if band <= 0:
        return s
    out: NDArray[Any] = np.where(s >= s.max() - band, np.arange(len(s), 0, -1), 0.0)
    return out


def _record(graph: WalkGraph[M], visited: Sequence[str], action: Any, row: int,
            taken: dict[str, list[tuple[int, int]]]) -> None:
    """Note the action each visited node was left by: the move to the next node visited, or
    the final ``action`` at the last one."""
    for k, nid in enumerate(visited):
        node = graph.nodes[nid]
        if k + 1 < len(visited):
            nxt = visited[k + 1]
            index = next(i for i, a in enumerate(node.actions)
                         if a.next is not None and a.next.id == nxt)
        elif action is None:
            continue
        else:
            index = next(i for i, a in enumerate(node.actions) if a is action)
        taken.setdefault(nid, []).append((row, index))


def patch_batch(result: BatchWalk, live: LiveRows,
                visit_cost: Mapping[str, NDArray[np.float64]]) -> None:
    """Overwrite ``live.rows`` of a batched walk's ``result`` (in place) with their live walks:
    end, kind, local probabilities, nodes visited and their visit costs, actions taken; their
    margin becomes 0 (not compared across dtypes). ``BatchWalk.read_mask`` stays the batch's:
    take the read sensors from ``live.read_bits``."""
    rows = live.rows
    position = {nid: k for k, nid in enumerate(result.node_ids)}
    result.final[rows] = [position[nid] for nid in live.final]
    result.kind[rows] = live.kind
    result.probabilities[rows] = live.local
    result.visited[rows] = [len(n) for n in live.nodes]
    if result.compute is not None:
        result.compute[rows] = 0.0
        for j, visited in enumerate(live.nodes):
            for nid in visited:
                if nid in visit_cost:
                    result.compute[rows[j]] += visit_cost[nid]
    if result.margin is not None:
        result.margin[rows] = 0.0
    gone = np.zeros(len(result.final), dtype=bool)
    gone[rows] = True
    for nid in set(result.visits) | set(live.taken):
        old_rows, old_choice = result.visits.get(
            nid, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        keep = ~gone[old_rows]
        new = np.array(live.taken.get(nid, []), dtype=np.int64).reshape(-1, 2)
        all_rows = np.concatenate([old_rows[keep], new[:, 0]])
        order = np.argsort(all_rows, kind="stable")
        result.visits[nid] = (all_rows[order],
                              np.concatenate([old_choice[keep], new[:, 1]])[order])


def bits_mask(bits: IntArray, n_sensors: int) -> BoolArray:
    """[N, n_sensors] from per-row sensor bits."""
    out: BoolArray = (bits[:, None] >> np.arange(n_sensors)) & 1 == 1
    return out
