"""cloud.stats: the service's counters and its one log line."""

from __future__ import annotations

import math
from collections import Counter

from adaptedge.cloud.service.stats import ServiceStats, log_line


def test_an_idle_window_logs_no_nan() -> None:
    stats = ServiceStats()
    snap = stats.snapshot(Counter(), 0, reset_window=True)
    assert math.isnan(snap["service_p50_ms"])  # the map says "not measured"
    line = log_line(snap)
    assert "nan" not in line.lower() and "idle since the last report" in line
    assert "received=0" in line and "queue_depth=0" in line


def test_a_window_that_served_requests_logs_its_numbers() -> None:
    stats = ServiceStats()
    stats.received = 3
    stats.record_flush([1.0, 2.0, 3.0])  # one batch of 3 replies
    assert stats.replies == 3 and stats.batches == 1
    line = log_line(stats.snapshot(Counter({"bad_topic": 1}), 2, reset_window=True))
    assert "batch_mean=3.00" in line and "service_p50=2.000ms" in line
    assert "errors=1 (bad_topic=1)" in line and "idle" not in line
    # the window was reset: the next period served nothing
    assert "idle since the last report" in log_line(stats.snapshot(Counter(), 0,
                                                                   reset_window=True))
