"""A decision journal that survives ``kill -9``: JSON Lines, flushed per line, fsynced often.

One JSON object per line, told apart by ``kind``:

- ``start``: who and what (``device``, ``bundle_id``, ``operating_point``, ...), first;
- ``decision``: one per decision (``index``, ``label``, ``source``, ``cost``, ``t_s`` = seconds
  since the start, ...);
- ``counters``: the runtime's counters at that moment (written from time to time);
- ``summary``: written last, at a clean exit (end of data, SIGINT, SIGTERM).

Each line is flushed to the operating system as it is written, so killing the process loses
no finished line; ``os.fsync`` runs at most ``fsync_every_s`` after a line, so a power cut
loses at most that interval. ``summarize(read_journal(path))`` rebuilds the summary from any
journal, a killed run's included (``adaptedge edge summary FILE``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import numpy as np

SOURCES = ("local", "cloud", "degraded")
COST_UNITS = ("scalar", "energy_mj", "latency_ms", "money", "bytes")


class DecisionJournal:
    """Append JSON lines to ``path`` (created or truncated); use as a context manager."""

    def __init__(self, path: str | os.PathLike[str], *, fsync_every_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not fsync_every_s >= 0:
            raise ValueError(f"fsync_every_s must be >= 0, got {fsync_every_s}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = self.path.open("w", encoding="utf-8")
        self._fsync_every_s = fsync_every_s
        self._clock = clock
        self._synced_at = clock()
        self._dirty = False

    def write(self, kind: str, record: Mapping[str, Any]) -> None:
        """Write ``{"kind": kind, **record}`` as one line, flush it, fsync if one is due."""
        self._file.write(json.dumps({"kind": kind, **record}) + "\n")
        self._file.flush()
        self._dirty = True
        if self._clock() - self._synced_at >= self._fsync_every_s:
            self.sync()

    def sync(self) -> None:
        if self._dirty:
            os.fsync(self._file.fileno())
            self._dirty = False
        self._synced_at = self._clock()

    def close(self) -> None:
        if not self._file.closed:
            self.sync()
            self._file.close()

    def __enter__(self) -> DecisionJournal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def read_journal(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every complete line of a journal; a torn last line (a crash mid-write) is skipped."""
    out: list[dict[str, Any]] = []
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break  # only the last line can be torn
            obj = json.loads(line)
            if isinstance(obj, dict):
                out.append(obj)
    return out


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def summarize(lines: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The run's summary from its journal lines (those of any kind, in order).

    Everything comes from the decision lines except the uplink's ``late_replies`` and
    ``duplicate_replies``, taken from the last ``counters`` line. ``interrupted`` is true when
    the run was stopped early or the journal has no ``summary`` line (the process was killed).
    """
    start: Mapping[str, Any] = {}
    counters: Mapping[str, Any] = {}
    end: Mapping[str, Any] | None = None
    decisions: list[Mapping[str, Any]] = []
    for line in lines:
        kind = line.get("kind")
        if kind == "decision":
            decisions.append(line)
        elif kind == "start":
            start = line
        elif kind == "counters":
            counters = line.get("counters", {})
        elif kind == "summary":
            end = line
    n = len(decisions)
    latencies = [float(d["latency_ms"]) for d in decisions]

    def rate(hits: int) -> float:
        return hits / n if n else math.nan

    def mean(unit: str) -> float:
        return sum(float(d["cost"][unit]) for d in decisions) / n if n else math.nan

    return {
        "device": start.get("device"),
        "bundle_id": start.get("bundle_id"),
        "operating_point": start.get("operating_point"),
        "decisions": n,
        "by_source": {s: sum(d["source"] == s for d in decisions) for s in SOURCES},
        "accuracy": rate(sum(bool(d.get("correct")) for d in decisions)),
        "escalation_rate": rate(sum(bool(d["escalated"]) for d in decisions)),
        "sensor_failures": float(sum(len(d.get("failed_sensors") or {}) for d in decisions)),
        "late_replies": float(counters.get("late_replies", 0.0)),
        "duplicate_replies": float(counters.get("duplicate_replies", 0.0)),
        "mean_cost": {unit: mean(unit) for unit in COST_UNITS},
        "latency_p50_ms": _percentile(latencies, 50),
        "latency_p99_ms": _percentile(latencies, 99),
        "wall_s": float(decisions[-1].get("t_s", math.nan)) if decisions else 0.0,
        "interrupted": True if end is None else bool(end.get("interrupted")),
    }
