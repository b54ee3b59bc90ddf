"""The trainer's float64 walk (``trainer.policy.walk`` over ``protocol.walk``) on a hand-built
graph: stop, acquire, route with zero and with several reads, escalate; costs per
``protocol.costs``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from adaptedge.protocol.costs import decision_costs
from adaptedge.trainer.policy.graph import Graph, GraphAction, GraphNode, Metrics
from adaptedge.trainer.policy.walk import CostTable, walk

Scores = Callable[[np.ndarray], np.ndarray]


class Rule:
    """A node model from a scoring rule; answers class 1 when its first input is > 0.25."""

    def __init__(self, scores: Scores | None = None) -> None:
        self.scores = scores
        self.calls = 0

    def proba(self, X: np.ndarray) -> np.ndarray:
        self.calls += 1
        p = (X[:, 0] > 0.25).astype(np.float64) if X.shape[1] else np.zeros(len(X))
        return np.stack([1 - p, p], axis=1) * 0.8 + 0.1

    def action_scores(self, X: np.ndarray) -> np.ndarray | None:
        return None if self.scores is None else self.scores(X)

    def to_onnx(self) -> bytes:
        raise NotImplementedError


def _onehot(index: np.ndarray, n: int) -> np.ndarray:
    return np.eye(n)[index]


TABLE = CostTable(("a", "b", "c"), np.array([1.0, 2.0, 4.0]), 8.0,
                  np.array([True, False, True]))
X = np.array([[-1.0, 5, 5], [0.2, 5, 5], [0.7, 5, 5], [1.5, 5, 5], [2.0, 5, 5]], np.float32)
HPC = np.array([[0.0, 1.0]] * 5)


def graph() -> tuple[Graph, dict[str, Rule]]:
    """r (reads a): x0 < 0 stop, x0 < 1 route to r2 (reads nothing more), else route to abc
    (reads b and c); r2: x0 < 0.5 stop, else escalate (reads the HPC's c, pays the link)."""
    models = {
        "r": Rule(lambda x: _onehot(np.digitize(x[:, 0], [0.0, 1.0]), 3)),
        "r2": Rule(lambda x: _onehot((x[:, 0] >= 0.5).astype(int), 2)),
        "abc": Rule(),
    }
    nodes = {
        "r": GraphNode(("a",), (0,), (GraphAction("stop"), GraphAction("route", "r2"),
                                      GraphAction("route", "abc")), models["r"]),
        "r2": GraphNode(("a",), (0,), (GraphAction("stop"), GraphAction("escalate")),
                        models["r2"]),
        "abc": GraphNode(("a", "b", "c"), (0, 1, 2), (GraphAction("stop"),), models["abc"]),
    }
    return Graph("hand", "r", nodes), models


def test_route_reads_the_difference_zero_or_several_sensors() -> None:
    g, models = graph()
    result = walk(g, X, HPC, TABLE)
    assert result.read.tolist() == [[True, False, False], [True, False, False],
                                    [True, False, True], [True, True, True], [True, True, True]]
    assert result.escalated.tolist() == [False, False, True, False, False]
    assert result.cost.tolist() == [1.0, 1.0, 13.0, 7.0, 7.0]
    np.testing.assert_array_equal(result.cost, decision_costs(result.read, result.escalated,
                                                              TABLE.sensor_costs, 8.0))
    assert result.answer.tolist() == [0, 0, 1, 1, 1]
    assert {k: v.tolist() for k, v in result.visits.items()} == {
        "r": [0, 1, 2, 3, 4], "r2": [1, 2], "abc": [3, 4]}
    assert all(m.calls == 1 for m in models.values())  # batched: each node runs once
    assert result.metrics(np.array([0, 1, 1, 1, 0])) == Metrics(
        accuracy=0.6, cost=29 / 5, escalation_rate=0.2, avg_sensors_read=2.0)


def test_acquire_and_precomputed_outputs() -> None:
    g, models = graph()
    acquire = GraphNode(("a", "b"), (0, 1), (GraphAction("stop"),), Rule())
    nodes = dict(g.nodes)
    nodes["r"] = GraphNode(("a",), (0,), (GraphAction("stop"),
                                          GraphAction("acquire", "ab", "b")), models["r"])
    nodes["ab"] = acquire
    fixed = {"r": np.tile([0.0, 1.0], (5, 1))}

    def outputs(nid: str, node: GraphNode, rows: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray | None]:
        return np.tile([0.3, 0.7], (len(rows), 1)), fixed.get(nid, np.zeros((len(rows), 1)))[rows]

    result = walk(Graph("acq", "r", nodes), X, HPC, TABLE, outputs)
    assert result.read[:, :2].all() and not result.read[:, 2].any()
    assert result.cost.tolist() == [3.0] * 5 and result.answer.tolist() == [1] * 5
    assert models["r"].calls == 0


def test_a_cycle_or_a_dangling_next_is_refused() -> None:
    stop_or_go = (GraphAction("stop"), GraphAction("route", "b"))
    back = (GraphAction("stop"), GraphAction("route", "a"))
    nodes = {"a": GraphNode(("a",), (0,), stop_or_go, Rule()),
             "b": GraphNode(("a",), (0,), back, Rule())}
    with pytest.raises(ValueError, match="has a cycle: a -> b -> a"):
        walk(Graph("loop", "a", nodes), X, HPC, TABLE)
    with pytest.raises(ValueError, match="unknown node 'b'"):
        Graph("dangling", "a", {"a": nodes["a"]})
