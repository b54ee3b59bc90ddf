"""Service counters and service-time percentiles, as a flat ``name -> number`` map.

Cumulative counts since start; percentiles and batch sizes over the window since the last
report (bounded), so a periodic report shows current behaviour, not the all-time blend. A window
that served nothing has NaN percentiles and batch mean in the map (telemetry: "not measured");
``log_line`` says "idle" instead.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Final, Protocol

import numpy as np

WINDOW_LIMIT: Final = 100_000


class StatsObserver(Protocol):
    """Sees every batch size and service time as recorded (``cloud.metrics`` histograms)."""

    def batch_size(self, size: int) -> None: ...

    def service_ms(self, values: list[float]) -> None: ...


class ServiceStats:
    def __init__(self) -> None:
        self.observer: StatsObserver | None = None
        self.received = 0
        self.replies = 0
        self.duplicates = 0
        self.resent = 0
        self.batches = 0
        self.dropped_topics = 0
        self.retained = 0
        self.forwarded = 0
        """Plain-topic requests of a bundle served elsewhere, republished on its topic."""
        self._window_ms: list[float] = []
        self._window_batches: list[int] = []

    def record_flush(self, service_ms: list[float]) -> None:
        """One published batch: its replies, its size and each one's service time (one call
        a flush: the lone-request path runs it for every request)."""
        size = len(service_ms)
        self.replies += size
        self.batches += 1
        if self.observer is not None:
            self.observer.batch_size(size)
            self.observer.service_ms(service_ms)
        if len(self._window_batches) < WINDOW_LIMIT:
            self._window_batches.append(size)
        room = WINDOW_LIMIT - len(self._window_ms)
        if room >= size:
            self._window_ms.extend(service_ms)
        elif room > 0:
            self._window_ms.extend(service_ms[:room])

    def snapshot(self, errors: Counter[str], queue_depth: int, *,
                 reset_window: bool) -> dict[str, float]:
        """All counters; ``reset_window`` starts a new percentile window."""
        times = np.asarray(self._window_ms, dtype=np.float64)
        sizes = np.asarray(self._window_batches, dtype=np.float64)
        out: dict[str, float] = {
            "received": self.received,
            "replies": self.replies,
            "errors": sum(errors.values()),
            "duplicates": self.duplicates,
            "resent": self.resent,
            "retained_ignored": self.retained,
            "forwarded": self.forwarded,
            "batches": self.batches,
            "queue_depth": queue_depth,
            "window_requests": int(times.size),
            "service_p50_ms": float(np.percentile(times, 50)) if times.size else math.nan,
            "service_p99_ms": float(np.percentile(times, 99)) if times.size else math.nan,
            "batch_mean": float(sizes.mean()) if sizes.size else math.nan,
            "batch_max": float(sizes.max()) if sizes.size else 0.0,
        }
        for code, count in sorted(errors.items()):
            out[f"error.{code}"] = count
        if reset_window:
            self._window_ms = []
            self._window_batches = []
        return out


def log_line(stats: dict[str, float]) -> str:
    """One human-readable line of the important numbers. A window that served nothing (NaN
    percentiles and batch mean in the map) reads "idle since the last report", never ``nan``."""
    errors = ", ".join(f"{k[6:]}={int(v)}" for k, v in stats.items() if k.startswith("error."))
    head = (f"received={int(stats['received'])} replies={int(stats['replies'])} "
            f"errors={int(stats['errors'])}{f' ({errors})' if errors else ''} "
            f"duplicates={int(stats['duplicates'])} batches={int(stats['batches'])} ")
    window = [stats.get(k, math.nan) for k in ("batch_mean", "service_p50_ms", "service_p99_ms")]
    if any(math.isnan(v) for v in window):
        return head + f"queue_depth={int(stats['queue_depth'])} (idle since the last report)"
    return head + (f"batch_mean={window[0]:.2f} batch_max={int(stats['batch_max'])} "
                   f"queue_depth={int(stats['queue_depth'])} service_p50={window[1]:.3f}ms "
                   f"p99={window[2]:.3f}ms")
