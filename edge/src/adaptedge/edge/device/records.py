"""What a device writes about itself: one decision's journal record and its telemetry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from adaptedge.edge.decision import Decision

TELEMETRY_WINDOW = 1000
"""The latency percentiles of telemetry cover this many most recent decisions."""


def decision_record(index: int, d: Decision, truth: str, t_s: float,
                    point: str | None = None) -> dict[str, Any]:
    """The ``decision`` line of row ``index`` (``t_s``: seconds since the run started;
    ``point``: the operating point that answered). A regression decision's line also has
    ``value`` and, when ``truth`` is a number, ``abs_error`` (in the target's units);
    ``correct`` is then None."""
    cost = d.cost
    record = {
        "index": index,
        "t_s": t_s,
        "label": d.label,
        "label_index": d.label_index,
        "truth": truth,
        "correct": d.label == truth,
        "source": d.source,
        "escalated": d.escalated,
        "sensors": list(d.sensors_read),
        "failed_sensors": d.failed_sensors,
        "nodes": list(d.nodes),
        "cost": {"energy_mj": cost.energy_mj, "latency_ms": cost.latency_ms,
                 "money": cost.money, "bytes": cost.bytes, "scalar": cost.scalar},
        "latency_ms": d.timings["total"] * 1000.0,
        "cloud_ms": d.timings["cloud"] * 1000.0,
        "request_id": d.request_id,
        "error": d.error,
        "bundle_id": d.bundle_id,
        "operating_point": point,
    }
    if d.value is not None:
        record.update(value=d.value, correct=None, abs_error=_abs_error(d.value, truth))
    return record


def _abs_error(value: float, truth: str) -> float | None:
    try:
        return abs(value - float(truth))
    except ValueError:
        return None


def telemetry(counters: Mapping[str, float], latencies: list[float]) -> dict[str, float]:
    """``counters`` and the p50/p99 decision latency (ms) of the recent decisions."""
    recent = latencies[-TELEMETRY_WINDOW:]
    out = dict(counters)
    out["latency_p50_ms"] = _percentile(recent, 50)
    out["latency_p99_ms"] = _percentile(recent, 99)
    return out


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")
