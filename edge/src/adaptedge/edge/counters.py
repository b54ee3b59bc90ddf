"""Telemetry counters of one runtime: decisions by source, escalations, faults, cost spent."""

from __future__ import annotations

from adaptedge.protocol.costs import CostBreakdown
from adaptedge.protocol.errors import EXPIRED, ID_REUSED, OVERLOADED

COUNTER_NAMES: tuple[str, ...] = (
    "decisions",
    "decisions_local",
    "decisions_cloud",
    "decisions_degraded",
    "escalations",
    "uplink_down",
    "deadline_missed",
    "cloud_errors",
    "cloud_id_reused",
    "cloud_overloaded",
    "cloud_expired",
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
    # edge.audit: rows kept for an HPC label, and what they cost beyond the decisions
    "audits",
    "audit_sensor_failures",
    "audit_energy_mj",
    "audit_latency_ms",
    "audit_money",
    "audit_bytes",
    "audit_cost",
)


CLOUD_ERROR_COUNTERS: dict[str, str] = {
    ID_REUSED: "cloud_id_reused",
    OVERLOADED: "cloud_overloaded",
    EXPIRED: "cloud_expired",
}
"""Cloud error codes counted on their own: the cloud refused a reused request id, shed the
request under load, or dropped it past its deadline. Like every error reply they leave the
decision to the local classifier (``source="degraded"``, ``error`` = the code)."""


def count_cloud_error(counters: dict[str, float], code: str) -> None:
    """Count an error reply: ``cloud_errors``, and its own counter for the codes above."""
    counters["cloud_errors"] += 1
    name = CLOUD_ERROR_COUNTERS.get(code)
    if name is not None:
        counters[name] += 1


def add_spent(totals: dict[str, float], spent: CostBreakdown, times: float = 1.0) -> None:
    """Add ``times`` x ``spent`` (a decision's cost, the nodes' evaluation costs) to the cost
    counters."""
    totals["energy_mj"] += times * spent.energy_mj
    totals["latency_ms"] += times * spent.latency_ms
    totals["money"] += times * spent.money
    totals["bytes"] += times * spent.bytes
    totals["cost"] += times * spent.scalar


def new_counters() -> dict[str, float]:
    return dict.fromkeys(COUNTER_NAMES, 0.0)


def with_rates(counters: dict[str, float]) -> dict[str, float]:
    """Add ``escalation_rate`` and ``degraded_rate`` (fractions of all decisions)."""
    n = counters.get("decisions", 0.0)
    out = dict(counters)
    out["escalation_rate"] = counters.get("escalations", 0.0) / n if n else 0.0
    out["degraded_rate"] = counters.get("decisions_degraded", 0.0) / n if n else 0.0
    return out
