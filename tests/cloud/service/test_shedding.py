"""The compute estimate of ``LoadShedder`` never locks the worker (issue 31 item 1): one slow
sample does not move it, and with nothing computed for a while the first request only the
estimate would shed is computed, so a stale estimate is measured again."""

from __future__ import annotations

import pytest

from adaptedge.cloud.service.shedding import (
    REPROBE_AFTER_S,
    ROW_SAMPLES,
    BacklogProbe,
    LoadShedder,
    Pending,
    shed_late,
)
from adaptedge.cloud.transport.connection import make_client
from adaptedge.protocol import ErrorReply, InferenceRequest
from adaptedge.protocol import errors as E


def request(rid: int, deadline_ms: float = 250.0) -> InferenceRequest:
    return InferenceRequest(rid, "d", "b", 0.0, deadline_ms, b"\0" * 4, b"\1")


def error(device: str, rid: int | None, code: str, message: str) -> ErrorReply:
    return ErrorReply(rid, device, code, message, 0.0)


def pending(rid: int, received: float) -> Pending:
    return (received, "r", "d", request(rid), b"", 0.0)


def probe() -> BacklogProbe:
    return BacklogProbe(make_client("w"), "adaptedge/v1/w/telemetry", "w")  # never sends here


def test_one_slow_computation_does_not_move_the_estimate() -> None:
    shedder = LoadShedder()
    for _ in range(3):
        shedder.record_compute(1, 0.001, now=0.0)
    shedder.record_compute(1, 7.0, now=0.0)  # a 7 s stall counted as one row's compute
    assert shedder.row_s == pytest.approx(0.001)
    assert shedder.in_time(request(1), 0.0 + shedder.row_s)


def test_a_run_cut_at_the_limit_is_no_sample() -> None:
    shedder = LoadShedder()
    shedder.record_compute(1, 2.0, sample=False, now=5.0)  # the first run ever, cut at 2 s
    assert shedder.row_s == 0.0 and shedder.computed_at == 5.0
    shedder.record_compute(4, 0.004, now=6.0)
    assert shedder.row_s == pytest.approx(0.001)


def test_an_estimate_past_every_deadline_is_measured_again_after_a_quiet_while() -> None:
    shedder = LoadShedder()
    for _ in range(ROW_SAMPLES):
        shedder.record_compute(1, 7.0, now=100.0)  # the estimate says: every answer is late
    assert shedder.row_s == pytest.approx(7.0)
    now = 100.0 + REPROBE_AFTER_S / 2  # computed a moment ago: shed on the estimate
    items = [pending(1, now)]
    assert shed_late(items, shedder, probe(), error, now) == []
    assert isinstance(items[0][3], ErrorReply) and items[0][3].code == E.EXPIRED
    now = 100.0 + REPROBE_AFTER_S  # nothing computed since: one request goes through
    items = [pending(2, now), pending(3, now)]
    assert [r.request_id for r in shed_late(items, shedder, probe(), error, now)] == [2]
    assert shedder.reprobes == 1 and isinstance(items[1][3], ErrorReply)
    # Each computed probe is a sample: the estimate is back after a majority of the window.
    for _ in range(ROW_SAMPLES // 2 + 1):
        shedder.record_compute(1, 0.001, now=now)
        now += REPROBE_AFTER_S
    assert shedder.row_s == pytest.approx(0.001)
    items = [pending(4, now)]
    assert len(shed_late(items, shedder, probe(), error, now)) == 1
    assert shedder.reprobes == 1  # computed on its own merit, not as a probe


def test_a_request_late_on_its_queueing_alone_is_never_a_probe() -> None:
    shedder = LoadShedder()
    shedder.record_compute(1, 7.0, now=0.0)
    now = 10.0
    items = [pending(1, now - 0.3)]  # waited 300 ms of a 250 ms deadline in the worker
    assert shed_late(items, shedder, probe(), error, now) == []
    assert shedder.reprobes == 0
