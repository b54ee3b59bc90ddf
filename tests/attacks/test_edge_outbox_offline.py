"""Issue 15 item 2: every escalation that got no cloud answer is in the outbox, whether the
broker went down mid-run, was never there, or the device runs with no uplink at all."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cloud import CloudService
from adaptedge.edge import EdgeRuntime, MqttUplink, Outbox
from adaptedge.edge.outbox import read_record
from adaptedge.protocol import Manifest
from adaptedge.simulator.brokers import MosquittoBroker, free_port
from tests.support.dataset_bundle import build_dataset_bundle

pytestmark = pytest.mark.broker
Bundle = tuple[Path, Manifest]
ROOT = Path(__file__).resolve().parents[2]


def rows(n: int) -> np.ndarray:
    return np.random.default_rng(8).normal(scale=2.0, size=(n, 3)).astype(np.float32)


def test_broker_going_down_mid_run_loses_no_escalation(
        toy_bundle: Bundle, mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    path, _ = toy_bundle
    cloud = CloudService(path, mosquitto.url, client_id="attack-cloud", stats_every_s=3600)
    cloud.start()
    uplink = MqttUplink(mosquitto.url, "dev1", reconnect_min_s=0.05).start()
    outbox = Outbox(tmp_path / "outbox")
    rt = EdgeRuntime.load(path, operating_point="gate", uplink=uplink, device_id="dev1",
                          outbox=outbox)
    try:
        assert uplink.wait_connected(10.0), uplink.last_error
        time.sleep(0.1)
        online = [rt.predict_row(r) for r in rows(60)]
        cloud.stop()
        mosquitto.stop()
        deadline = time.monotonic() + 5
        while uplink.is_connected() and time.monotonic() < deadline:
            time.sleep(0.01)
        offline = [rt.predict_row(r) for r in rows(120)[60:]]
    finally:
        uplink.close()
        rt.close()
    assert any(d.source == "cloud" for d in online)
    down = [d for d in offline if d.escalated]
    assert down and all((d.source, d.error) == ("degraded", "uplink_down") for d in down)
    escalations = sum(d.escalated for d in online + offline)
    kept = outbox.requests()
    assert len(kept) == len(outbox) == escalations == rt.counters["escalations"]
    assert len({r.request_id for r in kept}) == escalations
    sent = [d.request_id for d in online if d.request_id is not None]
    assert [r.request_id for r in kept[:len(sent)]] == sent
    assert rt.counters["outbox_errors"] == 0


@pytest.mark.parametrize("broker", ["never there", "no uplink"])
def test_offline_device_keeps_every_escalation(toy_bundle: Bundle, tmp_path: Path,
                                               broker: str) -> None:
    path, _ = toy_bundle
    uplink = MqttUplink(f"mqtt://127.0.0.1:{free_port()}", "dev1").start() \
        if broker == "never there" else None
    outbox = Outbox(tmp_path / "outbox")
    try:
        rt = EdgeRuntime.load(path, operating_point="walk", uplink=uplink, outbox=outbox)
        decisions = [rt.predict_row(r) for r in rows(150)]
    finally:
        if uplink is not None:
            uplink.close()
    escalated = [d for d in decisions if d.escalated]
    assert escalated and all(d.source == "degraded" for d in escalated)
    kept = outbox.requests()
    assert len(kept) == len(escalated)
    # Each record holds what the device measured, marked in its mask.
    for request, d in zip(kept, escalated, strict=True):
        measured = {0, 1} if "a" in d.sensors_read else set()
        measured |= {2} if "b" in d.sensors_read else set()
        assert set(np.flatnonzero(request.mask_array()).tolist()) == measured


@pytest.mark.slow
def test_edge_run_without_a_broker_keeps_every_escalation(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    build_dataset_bundle(bundle, "letter-binary")
    out, outbox = tmp_path / "decisions.jsonl", tmp_path / "outbox"
    launcher = "import sys; from adaptedge.cli.main import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", launcher, "edge", "run", "--bundle", str(bundle), "--replay",
         "letter-binary", "--limit", "80", "--broker", f"mqtt://127.0.0.1:{free_port()}",
         "--connect-timeout", "0.2", "--outbox", str(outbox), "--json-out", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "uplink: never connected to mqtt://127.0.0.1:" in proc.stdout
    assert "kept in --outbox" in proc.stdout
    text = out.read_text()
    records = [json.loads(line) for line in text.splitlines()] if "\n{" in text.strip() \
        else json.loads(text)["decisions"]
    escalated = [r for r in records if r.get("escalated")]
    assert escalated and all(r["error"] == "uplink_down" for r in escalated)
    kinds = [read_record(p)[1].kind for p in outbox.glob("*.msgpack")]
    assert kinds.count("escalated") == len(escalated)  # audits (edge.audit) come on top


@pytest.mark.slow
def test_edge_run_whose_broker_never_answers_says_so_and_fails_without_an_outbox(
        tmp_path: Path) -> None:
    """No outbox keeps the escalations: the summary says the uplink never came up, and the
    exit status is 1."""
    bundle = tmp_path / "bundle"
    build_dataset_bundle(bundle, "letter-binary")
    launcher = "import sys; from adaptedge.cli.main import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", launcher, "edge", "run", "--bundle", str(bundle), "--replay",
         "letter-binary", "--limit", "20", "--broker", f"mqtt://127.0.0.1:{free_port()}",
         "--connect-timeout", "0.2"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    assert "uplink: never connected to mqtt://127.0.0.1:" in proc.stdout
    assert "no --outbox kept them: exit status 1" in proc.stdout
