"""``RunLog``: a run's lines, kept for its summary and streamed to its journal when it has one."""

from __future__ import annotations

from typing import Any

from adaptedge.edge.journal import DecisionJournal


class RunLog:
    """Every line of a run (``start``, ``decision``, ``counters``, ``summary``; see
    ``edge.journal``) and the decision latencies (ms) the telemetry's percentiles come from."""

    def __init__(self, journal: DecisionJournal | None = None) -> None:
        self.journal = journal
        self.lines: list[dict[str, Any]] = []
        self.latencies: list[float] = []

    def write(self, kind: str, record: dict[str, Any]) -> None:
        self.lines.append({"kind": kind, **record})
        if self.journal is not None:
            self.journal.write(kind, record)

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
