from __future__ import annotations

from pathlib import Path

from adaptedge.edge.device import RunLog
from adaptedge.edge.journal import DecisionJournal, read_journal


def test_lines_are_kept_and_streamed_to_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    log = RunLog(DecisionJournal(path, fsync_every_s=0.0))
    log.write("start", {"device": "d"})
    log.write("decision", {"index": 0})
    log.close()
    assert log.lines == [{"kind": "start", "device": "d"}, {"kind": "decision", "index": 0}]
    assert read_journal(path) == log.lines
    offline = RunLog()
    offline.write("summary", {"decisions": 0})
    offline.close()
    assert offline.lines == [{"kind": "summary", "decisions": 0}]
