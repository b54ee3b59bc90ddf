"""Telemetry counters of one runtime: decisions by source, escalations, faults, cost spent."""

from __future__ import annotations

COUNTER_NAMES: tuple[str, ...] = (
    "decisions",
    "decisions_local",
    "decisions_cloud",
    "decisions_degraded",
    "escalations",
    "uplink_down",
    "deadline_missed",
    "cloud_errors",
    "mismatched_replies",
    "uplink_errors",
    "outbox_errors",
    "sensor_failures",
    "late_replies",
    "duplicate_replies",
    "energy_mj",
    "latency_ms",
    "money",
    "bytes",
    "cost",
)


def new_counters() -> dict[str, float]:
    return dict.fromkeys(COUNTER_NAMES, 0.0)


def with_rates(counters: dict[str, float]) -> dict[str, float]:
    """Add ``escalation_rate`` and ``degraded_rate`` (fractions of all decisions)."""
    n = counters.get("decisions", 0.0)
    out = dict(counters)
    out["escalation_rate"] = counters.get("escalations", 0.0) / n if n else 0.0
    out["degraded_rate"] = counters.get("decisions_degraded", 0.0) / n if n else 0.0
    return out
