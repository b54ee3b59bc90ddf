from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from adaptedge.edge import EdgeRuntime
from adaptedge.edge.device.records import TELEMETRY_WINDOW, decision_record, telemetry
from adaptedge.protocol import Manifest


def test_telemetry_adds_the_recent_latency_percentiles() -> None:
    old = [1000.0] * 50
    recent = list(np.linspace(1.0, 2.0, TELEMETRY_WINDOW))
    out = telemetry({"decisions": 7.0}, old + recent)
    assert out["decisions"] == 7.0
    assert out["latency_p50_ms"] == pytest.approx(float(np.percentile(recent, 50)))
    assert out["latency_p99_ms"] == pytest.approx(float(np.percentile(recent, 99)))
    empty = telemetry({}, [])
    assert math.isnan(empty["latency_p50_ms"]) and math.isnan(empty["latency_p99_ms"])


def test_a_decision_record_is_the_decision_in_journal_units(
        toy_bundle: tuple[Path, Manifest]) -> None:
    root, manifest = toy_bundle
    with EdgeRuntime.load(root) as rt:
        d = rt.predict_row(np.full(len(manifest.feature_names), 0.5, np.float32))
    record = decision_record(3, d, d.label, 0.25)
    assert (record["index"], record["t_s"], record["correct"]) == (3, 0.25, True)
    assert decision_record(3, d, "not-" + d.label, 0.25)["correct"] is False
    assert record["latency_ms"] == pytest.approx(d.timings["total"] * 1000.0)
    assert record["cost"]["scalar"] == d.cost.scalar
    assert record["sensors"] == list(d.sensors_read) and record["source"] == d.source
