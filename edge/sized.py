"""Costs that grow with the item's size, on the device: one decision's cost at its size.

A decision of an item of size ``n`` pays each sensor it read at ``n`` (``protocol.costs``, the
one rule); its cost is counted into the runtime's counters directly (the per-set cache of
constant costs cannot hold it).
"""

from __future__ import annotations

import math

from adaptedge.edge.errors import EdgeError
from adaptedge.protocol.costs import CostBreakdown, decision_cost
from adaptedge.protocol.manifest import Manifest


def check_size(size: float) -> float:
    """The item's size as a float; ``EdgeError`` unless finite and >= 0."""
    value = float(size)
    if not math.isfinite(value) or value < 0:
        raise EdgeError(f"an item's size must be a finite number >= 0, got {size!r}")
    return value


def sized_cost(manifest: Manifest, sensor_names: tuple[str, ...], key: int, size: float,
               counters: dict[str, float], source: str) -> CostBreakdown:
    """Cost of reading set ``key >> 1`` (escalated if ``key & 1``) for an item of ``size``;
    counts the decision and its cost into ``counters``."""
    read_bits = key >> 1
    names = [n for i, n in enumerate(sensor_names) if read_bits >> i & 1]
    cost = decision_cost(manifest, names, bool(key & 1), check_size(size))
    counters["decisions"] += 1
    counters["decisions_" + source] += 1
    counters["energy_mj"] += cost.energy_mj
    counters["latency_ms"] += cost.latency_ms
    counters["money"] += cost.money
    counters["bytes"] += cost.bytes
    counters["cost"] += cost.scalar
    return cost
