"""``adaptedge edge run``: replay a dataset through a device process talking to a real broker."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from adaptedge.edge import EdgeRuntime
from adaptedge.edge.journal import read_journal, summarize
from adaptedge.simulator.brokers import MosquittoBroker
from adaptedge.trainer.data.datasets import load_dataset
from tests.support.dataset_bundle import build_dataset_bundle
from tests.support.edge_doubles import MqttResponder
from tests.support.reference_walk import ReferenceWalk

pytestmark = pytest.mark.broker
ROOT = Path(__file__).resolve().parents[2]


def edge_run(*args: str) -> list[str]:
    launcher = "import sys; from adaptedge.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", launcher, "edge", "run", *args]


@pytest.mark.slow
def test_replay_with_cloud_writes_decisions(tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    bundle = tmp_path / "bundle"
    manifest = build_dataset_bundle(bundle, "letter-binary")
    responder = MqttResponder(mosquitto.url, ReferenceWalk(bundle, manifest))
    responder.wait_subscribed()
    out = tmp_path / "decisions.jsonl"
    try:
        proc = subprocess.run(
            edge_run("--bundle", str(bundle), "--broker", mosquitto.url, "--device", "dev7",
                     "--replay", "letter-binary", "--split", "test", "--limit", "60",
                     "--telemetry-every", "0.05", "--json-out", str(out)),
            capture_output=True, text=True, timeout=120, cwd=ROOT)
    finally:
        responder.close()
    assert proc.returncode == 0, proc.stderr
    assert "decisions 60" in proc.stdout and "accuracy" in proc.stdout
    lines = read_journal(out)
    assert [line["kind"] for line in (lines[0], lines[-2], lines[-1])] == \
        ["start", "counters", "summary"]
    decisions = [line for line in lines if line["kind"] == "decision"]
    summary = lines[-1]
    assert [d["index"] for d in decisions] == list(range(60))
    data = load_dataset("letter-binary")
    truth = [data.classes[int(t)] for t in data.y_test[:60]]
    assert [d["truth"] for d in decisions] == truth
    assert summary["accuracy"] == pytest.approx(
        np.mean([d["label"] == t for d, t in zip(decisions, truth, strict=True)]))
    # The summary written at exit is the one the stream gives.
    assert {"kind": "summary", **summarize(lines)} == summary
    assert summary["device"] == "dev7" and summary["interrupted"] is False
    sources = {d["source"] for d in decisions}
    assert "cloud" in sources and "degraded" not in sources
    # Local answers equal the in-process runtime's on the same rows.
    rt = EdgeRuntime.load(bundle)
    for d, row in zip(decisions, data.X_test[:60], strict=True):
        expected = rt.predict_row(row)
        assert d["escalated"] == expected.escalated
        if not d["escalated"]:
            assert d["label"] == expected.label
        assert d["cost"]["scalar"] == pytest.approx(expected.cost.scalar)


@pytest.mark.slow
def test_sigterm_stops_cleanly_with_a_summary(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    build_dataset_bundle(bundle, "letter-binary")
    out = tmp_path / "decisions.jsonl"
    proc = subprocess.Popen(
        edge_run("--bundle", str(bundle), "--replay", "letter-binary", "--rate", "50",
                 "--json-out", str(out)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        give_up = time.monotonic() + 60
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], 30.0)
        assert ready, "the device never started replaying"
        assert "replaying 4000 rows" in proc.stderr.readline()
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=max(1.0, give_up - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert "(interrupted)" in stdout
    lines = read_journal(out)
    decisions = [line for line in lines if line["kind"] == "decision"]
    assert 0 < len(decisions) < 4000 and lines[-1]["kind"] == "summary"
    assert lines[-1]["interrupted"] and lines[-1]["decisions"] == len(decisions)
    # Offline: every escalation answered degraded.
    assert all(d["source"] != "cloud" for d in decisions)


@pytest.mark.slow
def test_mismatched_dataset_is_a_user_error(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    build_dataset_bundle(bundle, "letter-binary")
    proc = subprocess.run(edge_run("--bundle", str(bundle), "--replay", "satimage"),
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert "do not match dataset 'satimage'" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("extra", "message"), [
    (["--budget", "1"], "no operating point costs <= 1"),
    (["--operating-point", "nope"], "no operating point 'nope'"),
    (["--broker", "http://x"], "is not mqtt://HOST"),
    (["--fsync-every", "-1"], "--fsync-every must be >= 0"),
    (["--sensor-timeout", "0"], "sensor timeout for"),
    (["--json-out", "/proc/no-such-dir/decisions.jsonl"], "cannot write --json-out"),
])
def test_bad_options_are_user_errors(tmp_path: Path, extra: list[str], message: str) -> None:
    bundle = tmp_path / "bundle"
    build_dataset_bundle(bundle, "letter-binary")
    proc = subprocess.run(edge_run("--bundle", str(bundle), "--replay", "letter-binary", *extra),
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
