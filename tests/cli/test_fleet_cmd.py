"""The fleet loop from the command line: ``cloud serve --db`` and ``edge run --outbox
--audit-fraction`` on a real mosquitto; every escalation and audit ends in the store once, the
outbox is empty, the summary shows what the audits cost."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from adaptedge.cloud.fleet.store import FleetStore
from adaptedge.cloud.fleet.view import device_status
from adaptedge.edge.journal import read_journal
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.dataset_bundle import build_dataset_bundle
from tests.support.fleet import REPO, start_cloud, wait_ready

pytestmark = pytest.mark.broker


def edge_run(bundle: Path, url: str, device: str, outbox: Path,
             *extra: str) -> subprocess.CompletedProcess[str]:
    launcher = "import sys; from adaptedge.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", launcher, "edge", "run", "--bundle", str(bundle), "--broker", url,
         "--device", device, "--replay", "letter-binary", "--outbox", str(outbox),
         "--audit-fraction", "0.2", "--audit-seed", "5", *extra],
        capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.mark.slow
def test_edge_run_audits_and_forwards_its_outbox(tmp_path: Path,
                                                 mosquitto: MosquittoBroker) -> None:
    bundle = tmp_path / "bundle"
    build_dataset_bundle(bundle, "letter-binary", n_sensors=8)  # audits read the other 8
    db, log, outbox = tmp_path / "fleet.db", tmp_path / "cloud.log", tmp_path / "outbox"
    cloud = start_cloud(bundle, mosquitto.url, db, log)
    try:
        wait_ready(cloud, log)
        proc = edge_run(bundle, mosquitto.url, "dev3", outbox, "--limit", "300",
                        "--json-out", str(tmp_path / "run.jsonl"), "--drain-wait", "20")
        # a slow drain that gives up at once: the device reports its backlog in its telemetry
        slow = edge_run(bundle, mosquitto.url, "dev4", tmp_path / "outbox4", "--limit", "120",
                        "--drain-rate", "1", "--drain-wait", "0")
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
        keys = [k for k in store.record_keys() if k[0] == "dev3"]
        assert len(keys) == len(set(keys)) == audits + escalations
        kinds = {kind: n for dev, _, kind, n, _, _ in store.tallies() if dev == "dev3"}
        assert kinds == {"audit": audits, "escalated": escalations}
        assert len(store.labelled_rows(device="dev3")) == audits + escalations
    assert slow.returncode == 0, slow.stderr
    left = len(list((tmp_path / "outbox4").glob("*.msgpack")))
    with FleetStore(db) as store:
        backlog = [c for d, _, c in store.telemetry() if d == "dev4"][-1]
        status = {r["device"]: r for r in device_status(store)}
    assert left > 0 and backlog["outbox_records"] >= left and backlog["drain_stored"] >= 1
    assert status["dev4"]["outbox_records"] == backlog["outbox_records"]
    assert status["dev3"]["outbox_records"] == 0
