"""Issue 15 item 3: ``edge run --json-out`` keeps the decisions made before a ``kill -9``.

The device streams JSON Lines (flushed per line, fsynced at a bounded interval), so a killed
run's file holds a valid line for every decision up to the kill, and ``adaptedge edge summary``
rebuilds the summary from it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adaptedge.edge.journal import DecisionJournal, read_journal, summarize
from tests.support.dataset_bundle import build_dataset_bundle

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = "import sys; from adaptedge.cli.main import main; sys.exit(main(sys.argv[1:]))"
RATE_HZ = 100.0


def adaptedge(*args: str) -> list[str]:
    return [sys.executable, "-c", LAUNCHER, *args]


def decision_lines(path: Path) -> list[dict[str, object]]:
    """Every line must be valid JSON (nothing torn, nothing missing its newline)."""
    text = path.read_text() if path.exists() else ""
    lines = [json.loads(line) for line in text.splitlines()]
    assert not text or text.endswith("\n")
    return [line for line in lines if line.get("kind") == "decision"]


@pytest.mark.slow
def test_kill_9_keeps_every_decision_made_before_it(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    build_dataset_bundle(bundle, "letter-binary")
    out, err = tmp_path / "decisions.jsonl", tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            adaptedge("edge", "run", "--bundle", str(bundle), "--replay", "letter-binary",
                      "--rate", f"{RATE_HZ:g}", "--json-out", str(out)),
            stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while len(decision_lines(out)) < 30 and time.monotonic() < deadline:
            assert proc.poll() is None, err.read_text()
            time.sleep(0.05)
        seen = len(decision_lines(out))
        assert seen >= 30, "the device never got going"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    decisions = decision_lines(out)
    # Every decision up to the kill is there (it was running 100 per second; the kill came
    # within a few polls of the last count), in order, none torn.
    assert seen <= len(decisions) < seen + 0.5 * RATE_HZ
    assert [d["index"] for d in decisions] == list(range(len(decisions)))
    lines = read_journal(out)
    assert lines[0]["kind"] == "start" and lines[-1]["kind"] != "summary"
    summary = summarize(lines)
    assert summary["decisions"] == len(decisions) and summary["interrupted"] is True
    shown = subprocess.run(adaptedge("edge", "summary", str(out), "--json"),
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["decisions"] == len(decisions)
    text = subprocess.run(adaptedge("edge", "summary", str(out)), capture_output=True,
                          text=True, timeout=60, cwd=ROOT).stdout
    assert f"decisions {len(decisions)}:" in text and "(interrupted)" in text


def test_journal_fsyncs_at_a_bounded_interval(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import threading

    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with DecisionJournal(tmp_path / "j.jsonl", fsync_every_s=0.05) as j:
        j.write("decision", {"index": 0})
        assert len(read_journal(tmp_path / "j.jsonl")) == 1  # flushed at once
        deadline = time.monotonic() + 5
        while not synced and time.monotonic() < deadline:
            time.sleep(0.01)
        assert synced == ["edge.journal_fsync"]  # off the caller's thread, within the interval
        time.sleep(0.2)
        assert len(synced) == 1  # nothing new written: no fsync
        j.write("decision", {"index": 1})
    assert len(synced) == 2  # close fsyncs what is left
    with DecisionJournal(tmp_path / "k.jsonl", fsync_every_s=0) as k:
        k.write("decision", {"index": 0})
        assert synced[-1] == threading.current_thread().name  # 0: every line, in place
    with pytest.raises(ValueError, match="fsync_every_s"):
        DecisionJournal(tmp_path / "l.jsonl", fsync_every_s=float("nan"))


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"kind": "start", "device": "d"}\n{"kind": "decision", "ind')
    assert read_journal(path) == [{"kind": "start", "device": "d"}]


@pytest.mark.parametrize("text", ["hello\n", '{"summary": {}, "decisions": []}\n', ""])
def test_summary_of_a_file_that_is_no_journal_is_a_user_error(tmp_path: Path,
                                                              text: str) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(text)
    proc = subprocess.run(adaptedge("edge", "summary", str(path)), capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and "cannot read" in proc.stderr
    assert "Traceback" not in proc.stderr
