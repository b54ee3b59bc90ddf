"""Shared assertion: an exported DAG policy run in onnxruntime matches the Python walk."""

from __future__ import annotations

from typing import Any

import numpy as np


def assert_same_walk(onnx_result: Any, mine: Any, sensor_names: list[str], label: str) -> None:
    """Same escalations, same local answers and the same sensors read, row for row."""
    assert np.array_equal(onnx_result.escalated, mine.escalated), label
    local = ~mine.escalated
    assert np.array_equal(onnx_result.labels[local], mine.answer[local]), label
    order = [sensor_names.index(n) for n in onnx_result.sensor_names]
    assert np.array_equal(onnx_result.sensors_read, mine.read[:, order]), label
