"""The drift scenario's pieces (simulator.drift) on the toy bundle, and the gas scenario's
acceptance numbers (slow: it trains on gas batches 1-2)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaptedge.cloud.fleet.drift import DriftDesign
from adaptedge.protocol import Manifest
from adaptedge.protocol.costs import decision_cost
from adaptedge.protocol.drift_reference import REFERENCE_KEY
from benchmarks.gas_drift.stream import (
    DriftConfig,
    labelled_rows,
    monitor_stream,
    run_stream,
)


def test_audits_are_charged_apart_and_become_rows(toy_bundle: tuple[Path, Manifest]) -> None:
    bundle, manifest = toy_bundle
    X = np.random.default_rng(0).normal(size=(600, 3)).astype(np.float32)
    y = np.zeros(600, dtype=np.int64)
    config = DriftConfig(audit_fraction=0.3, audit_seed=1)
    stream = run_stream(bundle, X, y, config)
    escalated = np.asarray(stream.run.columns.escalated, dtype=bool)
    assert stream.audited.any() and not (stream.audited & escalated).any()
    expected = 0.0
    for i in np.flatnonzero(stream.audited):
        read = set(stream.run.columns.sensors[i])
        expected += (decision_cost(manifest, read | set(manifest.hpc.sensors), True).energy_mj
                     - decision_cost(manifest, read, False).energy_mj)
    assert stream.audit_cost["audits"] == stream.audited.sum()
    assert stream.audit_cost["energy_mj"] == pytest.approx(expected)
    assert stream.audit_cost["energy_mj"] > 0
    assert stream.decision_cost["energy_mj"] == pytest.approx(
        float(np.sum(stream.run.columns.energy_mj)))  # audits are not in the decision costs
    rows = labelled_rows(manifest, stream, X, 300, config.rate_hz)
    kinds = [r.kind for r in rows]
    assert kinds.count("escalated") == escalated[:300].sum()
    assert kinds.count("audit") == stream.audited[:300].sum()
    assert all(r.request_id < 300 and r.bundle_id == manifest.bundle_id for r in rows)
    audit_row = next(r for r in rows if r.kind == "audit")
    assert audit_row.local_label == stream.local_label[audit_row.request_id]


def test_monitor_sees_the_stream_in_order(toy_bundle: tuple[Path, Manifest]) -> None:
    bundle, manifest = toy_bundle
    X = np.random.default_rng(1).normal(size=(800, 3)).astype(np.float32)
    stream = run_stream(bundle, X, np.zeros(800, dtype=np.int64), DriftConfig())
    rate = float(np.mean(stream.run.columns.escalated))
    assert abs(rate - 0.2) < 0.03  # the toy point's claimed 20%: no drift, no alarm
    assert monitor_stream(manifest, stream, DriftDesign()) == []
    claims_less = replace(manifest, metadata={**manifest.metadata, REFERENCE_KEY: {
        "walk": {"escalation_rate": 0.05, "n_rows": 2000}}})
    alarms = monitor_stream(claims_less, stream, DriftDesign())
    assert alarms and alarms[0].decision < 300
    assert {(a.stream, a.direction) for a in alarms} == {("escalation", "up")}
    assert [a.decision for a in alarms] == sorted(a.decision for a in alarms)


@pytest.mark.slow
def test_gas_drift_scenario_acceptance(gas_scenario: tuple[Path, dict[str, Any]]) -> None:
    """Seed 0: the alarm fires within 500 decisions of batch 3's start, never before it, and
    recalibration does not lower accuracy on the rest of the stream: it moves to another point
    only on audits that tell the points apart, else it keeps the deployed one and every
    decision is as before (``run_scenario``, once per run: tests/benchmarks/conftest.py)."""
    _, s = gas_scenario
    assert s["alarms_before_batch3"] == []
    assert s["alarm_delay_decisions"] is not None and s["alarm_delay_decisions"] < 500
    assert s["no_drift"]["resampled"]["streams_with_alarm"] == 0
    rec = s["recalibration"]
    before, after = rec["before"], rec["after"]
    if rec["chosen"]["name"] == s["point"]:  # kept: the same decisions after the cut
        assert after["accuracy"] == before["accuracy"]
        assert after["escalation_rate"] == before["escalation_rate"]
    else:
        assert after["accuracy"] > before["accuracy"]
    assert rec["audit_cost_until_cut"]["audits"] == rec["rows"]["audit"]
