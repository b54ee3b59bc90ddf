"""The fleet loop from the command line: ``cloud serve --db`` and ``edge run --outbox
--audit-fraction`` on a real mosquitto; every escalation and audit ends in the store once, the
outbox is empty, the summary shows what the audits cost."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.dataset_bundle import build_dataset_bundle
from support.fleet import REPO, start_cloud, wait_ready

from adaptedge.cloud.store import FleetStore
from adaptedge.edge.journal import read_journal
from adaptedge.simulator.brokers import MosquittoBroker

pytestmark = pytest.mark.broker


def test_edge_run_audits_and_forwards_its_outbox(tmp_path: Path,
                                                 mosquitto: MosquittoBroker) -> None:
    bundle = tmp_path / "bundle"
    build_dataset_bundle(bundle, "letter-binary", n_sensors=8)  # audits read the other 8
    db, log, outbox = tmp_path / "fleet.db", tmp_path / "cloud.log", tmp_path / "outbox"
    cloud = start_cloud(bundle, mosquitto.url, db, log)
    try:
        wait_ready(cloud, log)
        launcher = "import sys; from adaptedge.cli.main import main; sys.exit(main(sys.argv[1:]))"
        proc = subprocess.run(
            [sys.executable, "-c", launcher, "edge", "run", "--bundle", str(bundle), "--broker",
             mosquitto.url, "--device", "dev3", "--replay", "letter-binary", "--limit", "300",
             "--outbox", str(outbox), "--audit-fraction", "0.2", "--audit-seed", "5",
             "--json-out", str(tmp_path / "run.jsonl"), "--drain-wait", "20"],
            capture_output=True, text=True, timeout=120, cwd=REPO)
    finally:
        cloud.terminate()
        cloud.wait(timeout=15)
    assert proc.returncode == 0, proc.stderr
    counters = [line for line in read_journal(tmp_path / "run.jsonl")
                if line["kind"] == "counters"][-1]["counters"]
    audits, escalations = int(counters["audits"]), int(counters["escalations"])
    assert audits > 20 and escalations > 0
    assert counters["audit_cost"] > 0 and counters["audit_bytes"] > 0
    line = re.search(r"audits (\d+) \(assurance cost: ([\d.]+) scalar", proc.stdout)
    assert line and int(line[1]) == audits and float(line[2]) == pytest.approx(
        counters["audit_cost"], rel=1e-3)
    assert "0 left" in proc.stdout and not list(outbox.glob("*.msgpack"))
    with FleetStore(db) as store:
        keys = store.record_keys()
        assert len(keys) == len(set(keys)) == audits + escalations
        kinds = {kind: n for _, _, kind, n, _, _ in store.tallies()}
        assert kinds == {"audit": audits, "escalated": escalations}
        assert len(store.labelled_rows(device="dev3")) == audits + escalations
