"""A decision journal that survives ``kill -9``: JSON Lines, flushed per line, fsynced often.

One JSON object per line, told apart by ``kind``:

- ``start``: who and what (``device``, ``bundle_id``, ``operating_point``, ...), first;
- ``decision``: one per decision (``index``, ``label``, ``source``, ``cost``, ``t_s`` = seconds
  since the start, ...);
- ``counters``: the runtime's counters at that moment (written from time to time);
- ``summary``: written last, at a clean exit (end of data, SIGINT, SIGTERM).

Each line is flushed to the operating system as it is written, so killing the process loses
no finished line; a background thread fsyncs every ``fsync_every_s`` (default 1 s), so a power
cut loses at most that interval and a slow disk never delays a decision. ``summarize(read_journal(path))`` rebuilds the summary from any
journal, a killed run's included (``adaptedge edge summary FILE``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import numpy as np

SOURCES = ("local", "cloud", "degraded")
COST_UNITS = ("scalar", "energy_mj", "latency_ms", "money", "bytes")


class DecisionJournal:
    """Append JSON lines to ``path`` (created or truncated, mode 0600); use as a context
    manager.

    A daemon thread fsyncs every ``fsync_every_s`` seconds when lines were written since the
    last one, so a slow disk never stalls the caller; ``fsync_every_s=0`` fsyncs each line in
    the caller's thread instead. ``close`` fsyncs what is left.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync_every_s: float = 1.0) -> None:
        if not 0 <= fsync_every_s < math.inf:
            raise ValueError(f"fsync_every_s must be >= 0 and finite, got {fsync_every_s}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Sensor readings: the owner's only (0600), an existing file's mode included.
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._file: IO[str] = os.fdopen(self._fd, "w", encoding="utf-8")
        # a pipe or terminal (/dev/stdout) cannot be fsynced (EINVAL): flushing is all there is
        self._durable = stat.S_ISREG(os.fstat(self._fd).st_mode)
        if self._durable:
            with contextlib.suppress(PermissionError):  # another user's file we may write
                os.fchmod(self._fd, 0o600)
        self._fsync_every_s = fsync_every_s
        self._dirty = False
        self._stop = threading.Event()
        self._syncer: threading.Thread | None = None
        if fsync_every_s > 0 and self._durable:
            self._syncer = threading.Thread(target=self._sync_loop, daemon=True,
                                            name="edge.journal_fsync")
            self._syncer.start()

    def write(self, kind: str, record: Mapping[str, Any]) -> None:
        """Write ``{"kind": kind, **record}`` as one line and flush it to the OS."""
        self._file.write(json.dumps({"kind": kind, **record}) + "\n")
        self._file.flush()
        self._dirty = True
        if self._syncer is None:
            self._sync()

    def _sync(self) -> None:
        if self._dirty and self._durable:
            self._dirty = False  # a line written during the fsync makes it dirty again
            os.fsync(self._fd)

    def _sync_loop(self) -> None:
        while not self._stop.wait(self._fsync_every_s):
            try:
                self._sync()
            except OSError:  # the disk failed: the writes themselves will report it
                return

    def close(self) -> None:
        self._stop.set()
        if self._syncer is not None:
            self._syncer.join()
        if not self._file.closed:
            self._file.flush()
            self._sync()
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


def _answered_by(decisions: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The bundles (and points) that answered, in order, with their decision counts: more than
    one after an over-the-air swap (decision lines without a bundle are not counted)."""
    runs: list[dict[str, Any]] = []
    for d in decisions:
        bundle, point = d.get("bundle_id"), d.get("operating_point")
        if bundle is None:
            continue
        if runs and runs[-1]["bundle_id"] == bundle and runs[-1]["operating_point"] == point:
            runs[-1]["decisions"] += 1
        else:
            runs.append({"bundle_id": bundle, "operating_point": point, "decisions": 1})
    return runs


def _count_reasons(decisions: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Degraded decisions by their ``error`` (``deadline``, ``unknown_bundle``, ...)."""
    counts: dict[str, int] = {}
    for d in decisions:
        if d.get("source") == "degraded":
            reason = str(d.get("error") or "unknown")
            counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


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

    answered = _answered_by(decisions)
    last = answered[-1] if answered else {}
    summary = {
        "device": start.get("device"),
        "bundle_id": last.get("bundle_id") or start.get("bundle_id"),
        "operating_point": last.get("operating_point") or start.get("operating_point"),
        "answered_by": answered,
        "uplink_connected": (None if "connects" not in counters
                             else float(counters["connects"]) > 0),
        "decisions": n,
        "by_source": {s: sum(d["source"] == s for d in decisions) for s in SOURCES},
        "accuracy": rate(sum(bool(d.get("correct")) for d in decisions)),
        "escalation_rate": rate(sum(bool(d["escalated"]) for d in decisions)),
        "degraded_by_reason": _count_reasons(decisions),
        "sensor_failures": float(sum(len(d.get("failed_sensors") or {}) for d in decisions)),
        "late_replies": float(counters.get("late_replies", 0.0)),
        "duplicate_replies": float(counters.get("duplicate_replies", 0.0)),
        "mean_cost": {unit: mean(unit) for unit in COST_UNITS},
        "latency_p50_ms": _percentile(latencies, 50),
        "latency_p99_ms": _percentile(latencies, 99),
        "wall_s": float(decisions[-1].get("t_s", math.nan)) if decisions else 0.0,
        "interrupted": True if end is None else bool(end.get("interrupted")),
    }
    if any("value" in d for d in decisions):
        summary.update(_errors(decisions))
    return summary


def _errors(decisions: list[Mapping[str, Any]]) -> dict[str, Any]:
    """A regression run's error in the target's units, over the decisions with a numeric
    truth (``abs_error``): ``mse``, ``mae`` and how many ``scored``; ``accuracy`` is NaN."""
    errors = [float(d["abs_error"]) for d in decisions if d.get("abs_error") is not None]
    n = len(errors)
    return {"accuracy": math.nan, "scored": n,
            "mse": sum(e * e for e in errors) / n if n else math.nan,
            "mae": sum(errors) / n if n else math.nan}
