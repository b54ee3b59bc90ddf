"""Issue 16, store-and-forward through a real mosquitto: every record reaches the store once,
across an outage, resends and ``kill -9`` of the draining device or of the cloud worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cloud.fleet.ingest import StoreIngest
from adaptedge.cloud.fleet.store import FleetStore
from adaptedge.cloud.service.inference import HpcInference
from adaptedge.edge import EdgeRuntime, MqttUplink, Outbox
from adaptedge.edge.drain import OutboxDrainer
from adaptedge.protocol import Manifest
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.fleet import (
    REPO,
    offline_outbox,
    postgres_database,
    postgres_unreachable,
    start_cloud,
    wait_ready,
    wait_until,
)

pytestmark = pytest.mark.broker
Bundle = tuple[Path, Manifest]


def rows(n: int, seed: int = 8) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=2.0, size=(n, 3)).astype(np.float32)


def assert_once(store: FleetStore, expected: int) -> None:
    keys = store.record_keys()
    assert len(keys) == expected == store.count_records()
    assert len(set(keys)) == len(keys)
    assert len({(d, r) for d, r, _ in keys}) == len(keys)  # one record per request id


def test_outage_every_escalation_reaches_the_store_once(
        toy_bundle: Bundle, tmp_path: Path) -> None:
    path, manifest = toy_bundle
    broker = MosquittoBroker()
    broker.start()
    store = FleetStore(tmp_path / "fleet.db")
    ingest = StoreIngest(HpcInference.load(path), store, broker.url, client_id="ingest")
    uplink = MqttUplink(broker.url, "dev1", reconnect_min_s=0.05, reconnect_max_s=0.2).start()
    outbox = Outbox(tmp_path / "outbox")
    rt = EdgeRuntime.load(path, operating_point="gate", uplink=uplink, outbox=outbox,
                          audit=AuditPolicy(fraction=0.3, seed=1))
    drainer = OutboxDrainer(outbox, uplink, "dev1", rate_per_s=500, ack_timeout_s=0.5)
    try:
        ingest.start()
        assert uplink.wait_connected(10.0), uplink.last_error
        drainer.start(tick_s=0.01)
        online = [rt.predict_row(r) for r in rows(60)]
        broker.stop()  # the link goes down: escalations degrade and wait in the outbox
        wait_until(lambda: not uplink.is_connected(), 5.0, "the uplink to notice")
        offline = [rt.predict_row(r) for r in rows(80, seed=9)]
        waiting = len(outbox)
        broker = MosquittoBroker(port=broker.port)
        broker.start()
        wait_until(lambda: drainer.idle, 30.0, "the outbox to drain after the outage")
    finally:
        drainer.stop()
        uplink.close()
        ingest.stop()
        broker.stop()
        rt.close()
    down = [d for d in offline if d.escalated]
    assert down and all(d.error == "uplink_down" for d in down) and waiting >= len(down)
    counters = rt.counters
    assert counters["audits"] > 0 and counters["audit_cost"] > 0
    expected = int(counters["escalations"] + counters["audits"])
    assert_once(store, expected)
    labelled = store.labelled_rows(bundle_id=manifest.bundle_id, device="dev1")
    audits = [r for r in labelled if r.kind == "audit"]
    assert len(audits) == counters["audits"]  # audits read the HPC's sensors: all labelled
    assert all(r.point == 0 and r.local_label is not None for r in audits)
    # The gate reads every sensor the HPC needs: escalations made offline are labelled too.
    sent = {d.request_id for d in online if d.request_id is not None}
    assert sent and sent <= {r.request_id for r in labelled if r.kind == "escalated"}
    tallies = {kind: (n, lab) for _, _, kind, n, lab, _ in store.tallies()}
    assert tallies["escalated"][0] == counters["escalations"]
    assert tallies["escalated"][1] == counters["escalations"]
    assert ingest.counts["duplicates"] == drainer.counters["drain_duplicates"]


def _drain_cmd(outbox: Path, url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "adaptedge.cli.main", "edge", "drain", "--outbox", str(outbox),
            "--broker", url, "--device", "dev1", "--timeout", "60", *extra]


@pytest.mark.slow
def test_kill_9_of_the_draining_device_loses_and_duplicates_nothing(
        toy_bundle: Bundle, mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    path, _ = toy_bundle
    n = offline_outbox(path, tmp_path / "outbox", 500)
    assert n > 40
    store = FleetStore(tmp_path / "fleet.db")
    ingest = StoreIngest(HpcInference.load(path), store, mosquitto.url, client_id="ingest")
    ingest.start()
    try:
        proc = subprocess.Popen(_drain_cmd(tmp_path / "outbox", mosquitto.url, "--rate", "30"),
                                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: store.count_records() >= 10, 30.0, "the first records")
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        partial = store.count_records()
        assert 0 < partial < n
        done = subprocess.run(_drain_cmd(tmp_path / "outbox", mosquitto.url, "--json"),
                              cwd=REPO, capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
    finally:
        ingest.stop()
    assert_once(store, n)
    assert not list((tmp_path / "outbox").glob("*.msgpack"))


@pytest.mark.slow
@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_kill_9_of_the_cloud_worker_mid_drain_loses_and_duplicates_nothing(
        toy_bundle: Bundle, mosquitto: MosquittoBroker, tmp_path: Path, database: str) -> None:
    if database == "sqlite":
        _kill_cloud_mid_drain(toy_bundle[0], mosquitto, tmp_path, tmp_path / "fleet.db")
        return
    reason = postgres_unreachable()
    if reason is not None:
        pytest.skip(reason)
    with postgres_database() as url:
        _kill_cloud_mid_drain(toy_bundle[0], mosquitto, tmp_path, url)


def _kill_cloud_mid_drain(path: Path, mosquitto: MosquittoBroker, tmp_path: Path,
                          db: Path | str) -> None:
    n = offline_outbox(path, tmp_path / "outbox", 500)
    log = tmp_path / "cloud.log"
    cloud = start_cloud(path, mosquitto.url, db, log)
    uplink = MqttUplink(mosquitto.url, "dev1", reconnect_min_s=0.05).start()
    outbox = Outbox(tmp_path / "outbox")
    drainer = OutboxDrainer(outbox, uplink, "dev1", rate_per_s=40, ack_timeout_s=0.5)
    store = FleetStore(db)
    try:
        wait_ready(cloud, log)
        assert uplink.wait_connected(10.0)
        drainer.start(tick_s=0.01)
        wait_until(lambda: store.count_records() >= 10, 30.0, "the first records")
        os.kill(cloud.pid, signal.SIGKILL)
        cloud.wait(timeout=10)
        partial = store.count_records()
        assert 0 < partial < n
        time.sleep(0.5)  # records keep coming and go unacknowledged meanwhile
        cloud = start_cloud(path, mosquitto.url, db, log)
        wait_ready(cloud, log)
        wait_until(lambda: drainer.idle, 60.0, "the outbox to drain after the restart")
    finally:
        drainer.stop()
        uplink.close()
        if cloud.poll() is None:
            cloud.terminate()
            cloud.wait(timeout=10)
    try:
        assert_once(store, n)
    finally:
        store.close()
    assert drainer.counters["drain_resent"] > 0  # unacknowledged records were sent again
