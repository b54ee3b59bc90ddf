"""Audit sampling on the device (``edge.audit``): the seeded choice by decision index, decisions
left unchanged, the audit's own cost counted apart, the rows kept as ``audit`` records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.edge import EdgeRuntime, Outbox
from adaptedge.edge.outbox import read_record
from adaptedge.protocol import Manifest
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.protocol.costs import decision_cost
from tests.support.edge_doubles import HpcUplink
from tests.support.reference_walk import ReferenceWalk

Bundle = tuple[Path, Manifest]


def rows(n: int, seed: int = 4) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=2.0, size=(n, 3)).astype(np.float32)


def test_audits_follow_the_policy_and_cost_apart(toy_bundle: Bundle, tmp_path: Path) -> None:
    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    policy = AuditPolicy(fraction=0.4, seed=11)
    plain = EdgeRuntime.load(path, operating_point="walk", uplink=HpcUplink(ref),
                             device_id="dev1", outbox=Outbox(tmp_path / "plain"))
    outbox = Outbox(tmp_path / "audited")
    audited = EdgeRuntime.load(path, operating_point="walk", uplink=HpcUplink(ref),
                               device_id="dev1", outbox=outbox, audit=policy)
    data = rows(300)
    before = [plain.predict_row(r) for r in data]
    after = [audited.predict_row(r) for r in data]
    for a, b in zip(before, after, strict=True):  # the audit changes no decision
        assert (a.label, a.source, a.sensors_read, a.cost) == (b.label, b.source,
                                                               b.sensors_read, b.cost)
    point = [p.name for p in manifest.operating_points].index("walk")
    local = [i for i, d in enumerate(after) if d.source == "local" and not d.escalated]
    chosen = [i for i in local if policy.selected("dev1", i, point)]
    assert 0 < len(chosen) < len(local)
    counters, base = audited.counters, plain.counters
    assert counters["audits"] == len(chosen)
    for key in ("decisions", "escalations", "cost", "energy_mj", "bytes"):
        assert counters[key] == base[key]  # the decisions' own cost is unchanged
    full = decision_cost(manifest, ("a", "b"), True)
    own = [decision_cost(manifest, after[i].sensors_read, False) for i in chosen]
    assert counters["audit_cost"] == pytest.approx(sum(full.scalar - c.scalar for c in own))
    assert counters["audit_energy_mj"] == pytest.approx(
        sum(full.energy_mj - c.energy_mj for c in own))
    assert counters["audit_bytes"] == len(chosen) * full.bytes > 0  # the link, per audit
    records = [read_record(p)[1:] for p in outbox.oldest(len(outbox))]
    audits = [(rec, req) for rec, req in records if rec.kind == "audit"]
    assert len(audits) == len(chosen)
    assert all(rec.point == point and req.mask_array().all() for rec, req in audits)
    assert [req.local_label for _, req in audits] == [after[i].label_index for i in chosen]
    escalated = [rec for rec, _ in records if rec.kind == "escalated"]
    assert len(escalated) == counters["escalations"]
    assert all(rec.point == point for rec in escalated)
    assert base["audits"] == 0 and len(Outbox(tmp_path / "plain")) == len(escalated)


def test_no_outbox_no_audit_and_failed_reads_keep_nothing(toy_bundle: Bundle,
                                                          tmp_path: Path) -> None:
    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    rt = EdgeRuntime.load(path, operating_point="walk", uplink=HpcUplink(ref),
                          audit=AuditPolicy(fraction=1.0))
    for r in rows(50):
        rt.predict_row(r)
    assert rt.counters["audits"] == 0 and rt.counters["audit_cost"] == 0  # nowhere to keep it
    outbox = Outbox(tmp_path / "o")
    rt = EdgeRuntime.load(path, operating_point="walk", uplink=HpcUplink(ref), outbox=outbox,
                          audit=AuditPolicy(fraction=1.0))
    data = rows(60)
    broken = {"a": lambda: data[0][:2], "b": lambda: (_ for _ in ()).throw(OSError("dead"))}
    decisions = [rt.predict(broken) for _ in range(20)]
    stopped = sum(d.source == "local" and "b" not in d.sensors_read for d in decisions)
    assert stopped and rt.counters["audit_sensor_failures"] == stopped
    assert rt.counters["audits"] == 0
    assert all(read_record(p)[1].kind == "escalated" for p in outbox.oldest(len(outbox)))
