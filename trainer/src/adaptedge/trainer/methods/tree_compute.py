"""What evaluating boosted trees costs, in the units a sensor read is priced in.

Both papers that boost trees under a budget charge each evaluated tree (Greedy Miser's eq. 4,
CSTC's eq. 22): ``tree_compute(sensors, fraction)`` prices one tree evaluation at ``fraction``
of the mean sensor read, and ``trees_compute`` multiplies it by the trees a node evaluates.
"""

from __future__ import annotations

from collections.abc import Sequence

from adaptedge.protocol.manifest import SensorSpec
from adaptedge.protocol.policy_graph import ComputeCost


def tree_compute(sensors: Sequence[SensorSpec], fraction: float) -> ComputeCost:
    """One tree evaluation: ``fraction`` of the mean sensor read's energy, latency and feature
    count (so its training scalar is that fraction of the mean sensor's, money aside)."""
    n = max(len(sensors), 1)
    return ComputeCost(energy_mj=fraction * sum(s.energy_mj for s in sensors) / n,
                       latency_ms=fraction * sum(s.latency_ms for s in sensors) / n,
                       units=fraction * sum(len(s.features) for s in sensors) / n)


def trees_compute(per_tree: ComputeCost, n_trees: int) -> ComputeCost:
    """What evaluating ``n_trees`` trees of ``per_tree`` each costs."""
    return ComputeCost(per_tree.energy_mj * n_trees, per_tree.latency_ms * n_trees,
                       per_tree.units * n_trees)
