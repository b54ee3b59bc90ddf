"""Shared assertion: an exported DAG policy run in onnxruntime matches the Python walk."""

from __future__ import annotations

from typing import Any

import numpy as np

FLOAT32_NOISE = 1e-6
"""Score or probability gap within which onnxruntime (float32) and the Python walk (float64)
may decide differently: their scores differ by ~1e-9, their probabilities by ~1e-7."""
MAX_BORDERLINE_SHARE = 0.01
"""At most this share of a split may sit that close to a tie (small lambdas crowd the action
scores: 3 of 1,091 wall-robot test rows at lambda 0.01)."""


def assert_same_walk(onnx_result: Any, mine: Any, sensor_names: list[str], label: str) -> None:
    """Same escalations, same local answers, the same sensors read and the same cost, row for
    row, on every row whose decisions are not within float32 noise of a tie
    (``WalkResult.margin``)."""
    order = [sensor_names.index(n) for n in onnx_result.sensor_names]
    same = ((onnx_result.escalated == mine.escalated)
            & (mine.escalated | (onnx_result.labels == mine.answer))
            & (onnx_result.sensors_read == mine.read[:, order]).all(axis=1)
            & np.isclose(onnx_result.cost, mine.cost, rtol=1e-9, atol=1e-9))
    borderline = mine.margin < FLOAT32_NOISE
    differ = np.flatnonzero(~same & ~borderline)
    assert not differ.size, (
        f"{label}: {differ.size} of {len(same)} rows decided differently, e.g. row {differ[0]} "
        f"(margin {mine.margin[differ[0]]:.3g})")
    assert borderline.mean() <= MAX_BORDERLINE_SHARE, (
        f"{label}: {int(borderline.sum())} rows within {FLOAT32_NOISE} of a tie")
