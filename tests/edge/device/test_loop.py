from __future__ import annotations

import threading
from pathlib import Path

import pytest

from adaptedge.edge import EdgeRuntime
from adaptedge.edge.device import DeviceOptions, ReplayRows, RunLog
from adaptedge.edge.device.loop import LOUD_ERRORS, replay
from adaptedge.protocol import Manifest
from adaptedge.protocol.messages import ErrorReply, InferenceRequest
from tests.support.edge_doubles import HpcUplink
from tests.support.reference_walk import ReferenceWalk

Letter = tuple[Path, Manifest, ReplayRows]


def test_every_row_is_decided_as_the_runtime_decides_it(letter: Letter) -> None:
    bundle, _, rows = letter
    log, said = RunLog(), []
    with EdgeRuntime.load(bundle) as rt, EdgeRuntime.load(bundle) as alone:
        replay(rt, None, rows, DeviceOptions(bundle, telemetry_every_s=0.0), log,
               threading.Event(), lambda: rt.counters, said.append)
        decisions = [line for line in log.lines if line["kind"] == "decision"]
        assert [d["index"] for d in decisions] == list(range(len(rows)))
        assert [d["truth"] for d in decisions] == list(rows.truth)
        for d, row in zip(decisions, rows.X, strict=True):
            expected = alone.predict_row(row)
            assert (d["label"], d["escalated"], d["source"]) == \
                (expected.label, expected.escalated, expected.source)
            assert d["cost"]["scalar"] == pytest.approx(expected.cost.scalar)
    assert len(log.latencies) == len(rows) and said == []
    assert all(line["kind"] == "decision" for line in log.lines)  # 0: no periodic counters


def test_a_set_stop_decides_nothing_more(letter: Letter) -> None:
    bundle, _, rows = letter
    stop, log = threading.Event(), RunLog()
    stop.set()
    with EdgeRuntime.load(bundle) as rt:
        replay(rt, None, rows, DeviceOptions(bundle), log, stop, lambda: rt.counters, print)
    assert log.lines == []


def test_counters_are_journaled_on_schedule(letter: Letter) -> None:
    bundle, _, rows = letter
    log = RunLog()
    with EdgeRuntime.load(bundle) as rt:
        replay(rt, None, rows, DeviceOptions(bundle, telemetry_every_s=1e-9), log,
               threading.Event(), lambda: rt.counters, print)
    kinds = [line["kind"] for line in log.lines]
    assert kinds == ["decision", "counters"] * len(rows)  # every decision is past due
    last = log.lines[-1]["counters"]
    assert last["decisions"] == len(rows)


def test_a_set_up_error_of_the_cloud_is_said_once(letter: Letter) -> None:
    bundle, manifest, rows = letter

    def unknown(req: InferenceRequest) -> ErrorReply:
        return ErrorReply(req.request_id, req.device, "unknown_bundle", "no such bundle", 0.0)

    uplink = HpcUplink(ReferenceWalk(bundle, manifest), behaviour=unknown)
    said: list[str] = []
    with EdgeRuntime.load(bundle, uplink=uplink) as rt:
        replay(rt, None, rows, DeviceOptions(bundle), RunLog(), threading.Event(),
               lambda: rt.counters, said.append)
    assert uplink.requests, "no row escalated: the test needs a bundle that escalates"
    with EdgeRuntime.load(bundle) as alone:
        first = next(i for i, row in enumerate(rows.X) if alone.predict_row(row).escalated)
    assert said == [f"warning: {LOUD_ERRORS['unknown_bundle']} (first at row {first})"]
