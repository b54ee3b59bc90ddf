"""The per-row driver on live sensors (``protocol.walk.walk_live``): a failed read leaves the
walk where it is and is not retried, the next best possible action is taken, and a root whose
own sensors failed escalates without trusting its scores."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.walk import ESCALATE, STOP, WalkNode, walk_live, walk_row
from tests.support.walk_graphs import SENSORS, compiled

F64 = npt.NDArray[np.float64]
# Per node: the action scores every row gets (the walk's choices, not the values, matter here).
SCORES = {"r": [0.0, 1.0, 3.0, 2.0, -1.0], "ab": [1.0, 0.0, 0.5], "ac": [0.0, 1.0],
          "all": [0.0]}


def run(node: WalkNode[str], values: F64) -> F64:
    return np.array(SCORES[node.model])


def test_a_failed_move_takes_the_next_best_action_and_reads_nothing_twice() -> None:
    graph = compiled()
    tried: list[str] = []

    def read(s: int) -> str | None:
        tried.append(SENSORS[s])
        return "unplugged" if SENSORS[s] == "c" else None

    # r prefers acquire c (3.0), then the route to all (2.0, which needs c too), then ab (1.0).
    node, action, trail = walk_live(graph.root, np.zeros(4), run, read, SENSORS)
    assert (node.id, action is not None and action.kind) == ("ab", STOP)
    assert trail.nodes == ["r", "ab"] and trail.order == ["a", "b"]
    assert trail.failed == {"c": "unplugged"} and tried == ["a", "c", "b"]  # c tried once
    no_failure = walk_row(graph.root, np.zeros(4), run, SENSORS)
    assert no_failure[0].id == "all" and no_failure[2].order == ["a", "c", "d", "b"]


def test_a_root_whose_sensors_failed_escalates_without_trusting_its_scores() -> None:
    graph = compiled()
    node, action, trail = walk_live(graph.root, np.zeros(4), run, lambda s: "timeout", SENSORS)
    assert node.id == "r" and action is graph.root.escalate and action is not None
    assert action.kind == ESCALATE and trail.failed == {"a": "timeout"} and trail.read_bits == 0
