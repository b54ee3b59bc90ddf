"""The rules at one node (``protocol.walk.step``): a failed sensor redirects the per-row step
without any I/O, and the batched choice takes the first action within the tie band."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.protocol.walk import (
    MOVE,
    STOP,
    WalkAction,
    WalkNode,
    choose,
    choose_rows,
    step,
    tie_margin,
)


def test_the_step_skips_moves_into_a_failed_sensor_without_any_io() -> None:
    def node(node_id: str, sensors: tuple[int, ...]) -> WalkNode[None]:
        return WalkNode(node_id, None, np.zeros(0, np.intp), sensors,
                        tuple(map(str, sensors)), sum(1 << s for s in sensors))

    here, wide, same = node("here", (0,)), node("wide", (0, 3, 1)), node("same", (0,))
    here.actions = [WalkAction(MOVE, wide, (3, 1), ("3", "1")), WalkAction(MOVE, same),
                    WalkAction(STOP)]
    here.single = False
    scores = np.array([3.0, 2.0, 1.0], np.float32)
    assert step(here, scores, read_bits=0b1) == (here.actions[0], (3, 1))
    assert step(here, scores, read_bits=0b1001) == (here.actions[0], (1,))  # 3 read already
    assert choose(here, scores, failed_bits=0b10) is here.actions[1]  # sensor 1 failed
    assert step(here, scores, read_bits=0b1, failed_bits=0b10) == (here.actions[1], ())
    assert choose(here, scores, scores_trusted=False) is None  # no escalate at this node


def test_ties_within_the_band_take_the_first_action_and_set_the_margin() -> None:
    scores = np.array([[1.0, 1.00005, 0.0], [0.0, 2.0, 1.0]])
    choice, margin = choose_rows(scores, 1e-4), tie_margin(scores, 1e-4)
    assert choice.tolist() == [0, 1]
    assert margin[0] == pytest.approx(5e-5) and margin[1] == pytest.approx(1e-4)
    scores = np.array([[-0.5, 0.5], [0.0, 0.0]])
    choice, margin = choose_rows(scores, 0.0), tie_margin(scores, 0.0)
    assert choice.tolist() == [1, 0] and margin.tolist() == [1.0, 0.0]


def test_the_choice_is_made_in_the_scores_dtype() -> None:
    """Two scores that differ in float64 but round to the same float32 tie in float32, where
    the first of them wins (what the device decides on onnxruntime's float32 scores)."""
    scores = np.array([[1.0, 1.0 + 1e-9]])
    assert choose_rows(scores).tolist() == [1]
    assert choose_rows(scores.astype(np.float32)).tolist() == [0]
