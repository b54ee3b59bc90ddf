"""Drift charts (cloud.drift): the designed false-alarm rate holds on simulated no-drift
Bernoulli streams (seeded), and a real shift alarms quickly."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cloud.fleet.drift import (
    BernoulliCusum,
    DriftDesign,
    DriftMonitor,
    FleetDriftMonitor,
    shifted,
    wilson_bounds,
)
from adaptedge.protocol import Manifest
from adaptedge.protocol.drift_reference import (
    Reference,
    reference_from_dict,
    reference_from_manifest,
)


def _first_alarm(monitor: DriftMonitor, esc: np.ndarray, audit_at: np.ndarray,
                 agree: np.ndarray) -> int | None:
    for i, x in enumerate(esc.tolist()):
        if monitor.observe_decision(x) is not None:
            return i
        if audit_at[i] and monitor.observe_audit(bool(agree[i])) is not None:
            return i
    return None


def test_threshold_is_the_union_bound() -> None:
    design = DriftDesign(false_alarm=0.01, horizon=10_000)
    assert design.threshold(3) == pytest.approx(math.log(3 * 10_000 / 0.01))
    monitor = DriftMonitor(Reference(0.1, 300, 0.95, 250), design)
    assert set(monitor.charts) == {("escalation", "up"), ("escalation", "down"),
                                   ("agreement", "down")}
    assert monitor.threshold == pytest.approx(design.threshold(3))
    low, high = wilson_bounds(0.1, 300, 0.99)
    assert monitor.charts["escalation", "up"].p0 == pytest.approx(high)
    assert monitor.charts["escalation", "down"].p0 == pytest.approx(low)
    assert monitor.charts["escalation", "up"].p1 == pytest.approx(shifted(high, 2.0))


@pytest.mark.slow
def test_false_alarm_rate_within_design_on_worst_case_null_streams() -> None:
    """Streams at the in-control bound itself (the hardest null): the share of streams with
    any alarm within the horizon stays at or below the designed rate (seed 0)."""
    design = DriftDesign(false_alarm=0.05, horizon=1500)
    reference = Reference(0.1, 300, 0.9, 250)
    probe = DriftMonitor(reference, design)
    p_up = probe.charts["escalation", "up"].p0
    p_agree = probe.charts["agreement", "down"].p0
    rng = np.random.default_rng(0)
    n_streams, alarms = 300, 0
    for _ in range(n_streams):
        monitor = DriftMonitor(reference, design)
        esc = rng.random(design.horizon) < p_up
        agree = rng.random(design.horizon) < p_agree
        audit_at = rng.random(design.horizon) < 0.1
        alarms += _first_alarm(monitor, esc, audit_at, agree) is not None
    assert alarms / n_streams <= design.false_alarm


def test_shift_alarms_fast_and_reports_the_evidence() -> None:
    design = DriftDesign(false_alarm=0.01, horizon=100_000)
    monitor = DriftMonitor(Reference(0.1, 300), design, device="d1", point="p")
    rng = np.random.default_rng(1)
    before = rng.random(3000) < 0.1
    after = rng.random(3000) < 0.35  # the escalation rate jumps
    assert _first_alarm(monitor, before, np.zeros(3000, bool), before) is None
    delay = _first_alarm(monitor, after, np.zeros(3000, bool), after)
    assert delay is not None and delay < 400
    alarm = monitor.alarms[0]
    assert (alarm.stream, alarm.direction, alarm.device) == ("escalation", "up", "d1")
    assert alarm.observed > 0.2 and alarm.statistic >= alarm.threshold
    assert "escalation up" in alarm.message()
    assert monitor.charts["escalation", "up"].statistic == 0.0  # restarted after the alarm


def test_agreement_drop_alarms_through_audits() -> None:
    monitor = DriftMonitor(Reference(0.1, 300, 0.97, 300))
    fired = None
    rng = np.random.default_rng(2)
    for _ in range(2000):
        monitor.observe_decision(bool(rng.random() < 0.1))
        fired = monitor.observe_audit(bool(rng.random() < 0.6))
        if fired is not None:
            break
    assert fired is not None and fired.stream == "agreement" and fired.audits < 200


def test_rates_at_the_edges_and_bad_input() -> None:
    only_up = DriftMonitor(Reference(0.0, None))  # exact 0: no down chart
    assert set(only_up.charts) == {("escalation", "up")}
    with pytest.raises(ValueError, match="p0"):
        BernoulliCusum(0.2, 0.2, 5.0)
    with pytest.raises(ValueError, match="false_alarm"):
        DriftDesign(false_alarm=0.0)
    with pytest.raises(ValueError, match="n_local"):
        reference_from_dict({"escalation_rate": 0.1, "n_local": -3})
    with pytest.raises(ValueError, match="escalation_rate"):
        reference_from_dict({"n_rows": 4})


def test_fleet_monitor_reads_the_manifest(toy_bundle: tuple[Path, Manifest]) -> None:
    manifest = toy_bundle[1]
    point = manifest.operating_points[0].name
    ref = reference_from_manifest(manifest, point)
    assert ref.escalation_rate == manifest.operating_points[0].escalation_rate
    assert ref.local_agreement is None
    fleet = FleetDriftMonitor(manifest)
    fleet.observe_decision("a", point, False)
    fleet.observe_decision("b", point, True)
    assert {k[0] for k in fleet.monitors} == {"a", "b"}


def test_telemetry_counts_feed_the_same_evidence() -> None:
    one_by_one = DriftMonitor(Reference(0.1, 300))
    counted = DriftMonitor(Reference(0.1, 300))
    pattern = [i % 4 == 3 for i in range(40)]  # 10 escalations in 40 decisions, spread evenly
    for x in pattern:
        one_by_one.observe_decision(x)
    assert counted.observe_counts(40, 10) == []
    assert counted.decisions == 40
    for key, chart in counted.charts.items():
        assert chart.statistic == pytest.approx(one_by_one.charts[key].statistic)
    alarms = counted.observe_counts(2000, 1200)  # a jump to 60% escalations
    assert alarms and alarms[0].stream == "escalation" and alarms[0].direction == "up"
    with pytest.raises(ValueError, match="escalated"):
        counted.observe_counts(3, 4)
