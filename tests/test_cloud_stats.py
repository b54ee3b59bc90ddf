"""Cloud service counters: the log line of an idle window."""

from __future__ import annotations

from collections import Counter

from adaptedge.cloud.stats import ServiceStats, log_line


def test_idle_log_line_prints_no_nan() -> None:
    line = log_line(ServiceStats().snapshot(Counter(), 0, reset_window=True))
    assert "nan" not in line.lower()
    assert "batch_mean=- " in line and "service_p50=- " in line and line.endswith("p99=-")


def test_busy_log_line_prints_the_numbers() -> None:
    stats = ServiceStats()
    stats.record_batch(4)
    stats.record_service_ms([1.0, 2.0, 3.0])
    line = log_line(stats.snapshot(Counter({"bad_request": 2}), 1, reset_window=True))
    assert "batch_mean=4.00 " in line and "service_p50=2.000ms " in line
    assert "errors=2 (bad_request=2)" in line
