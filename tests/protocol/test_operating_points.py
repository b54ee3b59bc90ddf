"""The one Pareto front and operating-point pickers (``protocol.operating_points``)."""

from __future__ import annotations

import math

import numpy as np

from adaptedge.protocol.costs import (
    CostBreakdown,
    cost_columns,
    decision_costs,
    link_cost,
    sensor_cost,
)
from adaptedge.protocol.manifest import CostWeights, LinkSpec, OperatingPoint, SensorSpec
from adaptedge.protocol.operating_points import (
    cheapest,
    cheapest_reaching,
    most_accurate,
    pareto_front,
    within_budget,
)


def _points() -> list[OperatingPoint]:
    spec = [("a", 0.80, 1.0), ("b", 0.85, 2.0), ("c", 0.84, 3.0), ("d", 0.90, 3.0),
            ("e", 0.90, 4.0), ("f", 0.79, 1.0), ("g", 0.85, 2.0)]
    return [OperatingPoint(n, n, accuracy=a, cost=c) for n, a, c in spec]


def test_front_keeps_the_undominated_points_cheapest_first() -> None:
    points = _points()
    assert [points[i].name for i in pareto_front(points)] == ["a", "b", "d"]
    assert pareto_front([]) == []


def test_pickers() -> None:
    points = _points()
    assert points[within_budget(points, 2.5) or 0].name == "b"  # b and g tie: the first
    assert within_budget(points, 100) == 3
    assert within_budget(points, 0.5) is None and within_budget(points, math.nan) is None
    assert cheapest_reaching(points, 0.845) == 1
    assert cheapest_reaching(points, 0.95) is None
    assert most_accurate(points) == 3 and cheapest(points) == 0
    assert most_accurate([]) is None and cheapest([]) is None


def test_decision_costs_is_decision_cost_for_a_batch() -> None:
    sensors = (SensorSpec("a", (0,), energy_mj=1.5, latency_ms=2.0),
               SensorSpec("b", (1,), energy_mj=0.5, money=0.01))
    link = LinkSpec(request_bytes=100, reply_bytes=20, rtt_ms=80.0, cloud_cost_per_call=0.002)
    weights = CostWeights()
    per_sensor, per_link = cost_columns(sensors, link, weights)
    read = np.array([[True, False], [True, True], [False, False]])
    escalated = np.array([False, True, True])
    got = decision_costs(read, escalated, per_sensor, per_link)
    assert got.shape == (3, 5)
    for row, e, costs in zip(read, escalated, got, strict=True):
        ref = CostBreakdown()
        for s, r in zip(sensors, row, strict=True):
            ref = ref + sensor_cost(s, weights) if r else ref
        ref = ref + link_cost(link, weights) if e else ref
        np.testing.assert_allclose(costs, [ref.scalar, ref.energy_mj, ref.latency_ms,
                                           ref.money, ref.bytes])
    scalar = decision_costs(read, escalated, per_sensor[:, 0], per_link[0])
    np.testing.assert_array_equal(scalar, got[:, 0])
