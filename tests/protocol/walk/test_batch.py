"""The batched driver (``protocol.walk.walk_batch``) decides as the per-row driver
(``walk_row``) does, row for row, on the same step: final node, stop or escalate, local answer,
sensors in reading order, visits and their evaluation costs; its dtype decides ties."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.walk import (
    ESCALATE,
    STOP,
    WalkNode,
    compile_graph,
    walk_batch,
    walk_row,
)
from tests.support.walk_graphs import GRAPH, SENSORS, Linear, compiled

F64 = npt.NDArray[np.float64]
COMPUTE = {"r": np.array([1.0]), "ac": np.array([4.0])}


def test_the_batch_decides_as_the_row_walk(global_random_seed: int) -> None:
    model = Linear(global_random_seed)
    X = np.random.default_rng(global_random_seed).normal(size=(500, len(SENSORS)))
    graph = compiled()

    def rows_run(node: WalkNode[str], rows: npt.NDArray[np.int64]) -> tuple[F64, F64 | None]:
        return model.outputs(node.model, X[np.ix_(rows, node.inputs)])

    batch = walk_batch(graph, len(X), 2, rows_run, dtype=np.float64, visit_cost=COMPUTE)
    kinds, paths = set(), set()
    for i, x in enumerate(X):
        def run(node: WalkNode[str], values: F64) -> F64:
            return model.outputs(node.model, values[node.inputs][None, :])[1][0]

        node, action, trail = walk_row(graph.root, x, run, SENSORS)
        assert batch.node_ids[batch.final[i]] == node.id, i
        assert batch.kind[i] == action.kind, i
        proba = model.outputs(node.id, x[node.inputs][None, :])[0]
        assert batch.local_label[i] == int(proba.argmax()), i
        assert tuple(SENSORS[s] for s in batch.trails[batch.trail[i]]) == tuple(trail.order), i
        assert batch.visited[i] == len(trail.nodes), i
        assert batch.compute is not None
        assert batch.compute[i, 0] == sum(COMPUTE.get(n, [0.0])[0] for n in trail.nodes), i
        assert batch.read_mask(len(SENSORS))[i].tolist() == [
            trail.read_bits >> s & 1 == 1 for s in range(len(SENSORS))], i
        kinds.add(int(action.kind))
        paths.add(tuple(trail.nodes))
    assert kinds == {STOP, ESCALATE}
    assert {("r", "ab"), ("r", "ac"), ("r", "all"), ("r", "ac", "all"), ("r",)} <= paths


def test_the_walks_dtype_decides_a_tie_it_cannot_resolve() -> None:
    """Scores 1e-9 apart tie in float32, where the first action (stop) wins; float64 takes the
    second (a route to ``ab``)."""
    graph = compile_graph(GRAPH, SENSORS, len(SENSORS), lambda node_id, _: node_id)
    scores = np.array([[1.0, 1.0 + 1e-9, 0.0, 0.0, 0.0]])

    def run(node: WalkNode[str], rows: npt.NDArray[np.int64]) -> tuple[F64, F64 | None]:
        n = len(node.actions)
        return np.full((len(rows), 2), 0.5), (scores if node.id == "r" else np.eye(n)[[0]])

    ends = {dtype: walk_batch(graph, 1, 2, run, dtype=dtype) for dtype in (np.float32,
                                                                          np.float64)}
    assert ends[np.float32].node_ids[ends[np.float32].final[0]] == "r"
    assert ends[np.float64].node_ids[ends[np.float64].final[0]] == "ab"
    assert ends[np.float64].visits["ab"][0].tolist() == [0]
