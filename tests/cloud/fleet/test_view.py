"""Issue 16 fleet view: a real ``cloud serve --db --metrics-port`` and an auditing device on a
real mosquitto; the metrics endpoint answers valid Prometheus text while they run, and
``fleet status`` / ``fleet report`` read the store they filled."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from adaptedge.cli.main import main as cli
from adaptedge.cloud.fleet.store import FleetStore
from adaptedge.cloud.fleet.view import expectations
from adaptedge.edge import EdgeRuntime, MqttUplink, Outbox
from adaptedge.edge.drain import OutboxDrainer
from adaptedge.protocol import Manifest
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.simulator.brokers import MosquittoBroker, free_port
from adaptedge.simulator.hil import HilOptions, run_hil
from adaptedge.simulator.scenario import DevicesConfig, Scenario
from adaptedge.trainer.data.datasets import load_dataset
from tests.support.dataset_bundle import build_dataset_bundle
from tests.support.fleet import metrics_port, start_cloud, wait_ready, wait_until

pytestmark = pytest.mark.broker
Bundle = tuple[Path, Manifest]


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain")
        body = reply.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body):  # raises on invalid text
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def run_device(path: Path, url: str, outbox_dir: Path, n: int) -> dict[str, float]:
    uplink = MqttUplink(url, "dev1", reconnect_min_s=0.05).start()
    outbox = Outbox(outbox_dir)
    rt = EdgeRuntime.load(path, operating_point="gate", uplink=uplink, outbox=outbox,
                          audit=AuditPolicy(fraction=0.5, seed=3))
    drainer = OutboxDrainer(outbox, uplink, "dev1", rate_per_s=1000, ack_timeout_s=1.0)
    try:
        assert uplink.wait_connected(10.0)
        drainer.start(tick_s=0.01)
        rows = np.random.default_rng(5).normal(scale=2.0, size=(n, 3)).astype(np.float32)
        for i, row in enumerate(rows):
            rt.predict_row(row)
            if i % 100 == 99:
                uplink.publish_telemetry(rt.counters)
        wait_until(lambda: drainer.idle, 30.0, "the outbox to drain")
        return rt.counters
    finally:
        drainer.stop()
        uplink.close()
        rt.close()


@pytest.mark.slow
def test_metrics_status_and_report_of_a_running_loop(
        toy_bundle: Bundle, mosquitto: MosquittoBroker, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path, manifest = toy_bundle
    db, log = tmp_path / "fleet.db", tmp_path / "cloud.log"
    cloud = start_cloud(path, mosquitto.url, db, log, "--metrics-port", "0")
    try:
        port = metrics_port(wait_ready(cloud, log))
        counters = run_device(path, mosquitto.url, tmp_path / "outbox", 600)
        with FleetStore(db) as store:
            wait_until(lambda: len(store.telemetry()) >= 6, 10.0, "the telemetry to be stored")
        store.add_alarm("dev1", manifest.bundle_id, 0, "agreement", "test alarm", 1.0)
        metrics = scrape(port)  # while the worker runs
    finally:
        cloud.terminate()
        cloud.wait(timeout=15)
    bundle = manifest.bundle_id
    device = {"device": "dev1", "bundle": bundle}
    assert (device, counters["decisions"]) in metrics["adaptedge_device_decisions_total"]
    assert (device, counters["escalations"]) in metrics["adaptedge_device_escalations_total"]
    assert (device, counters["audits"]) in metrics["adaptedge_device_audits_total"]
    stored = {s[0]["kind"]: s[1] for s in metrics["adaptedge_store_records_total"]}
    assert stored == {"escalated": counters["escalations"], "audit": counters["audits"]}
    with FleetStore(db) as store:
        _, _, _, _, labelled, same = next(t for t in store.tallies() if t[2] == "audit")
    assert labelled == counters["audits"]  # audits read the HPC's sensors: all labelled
    assert metrics["adaptedge_audit_agreement"] == [(device, same / labelled)]
    assert sorted(metrics["adaptedge_drift_alarms_total"], key=lambda s: s[0]["metric"]) == [
        ({"device": "dev1", "bundle": bundle, "metric": "agreement"}, 1.0),
        ({"device": "dev1", "bundle": bundle, "metric": "escalation"}, 0.0)]
    served = metrics["adaptedge_cloud_service_ms_count"][0][1]
    assert served == metrics["adaptedge_cloud_requests_total"][0][1] > 0
    assert metrics["adaptedge_cloud_batch_size_sum"][0][1] == served
    assert {s[0]["reason"] for s in metrics["adaptedge_cloud_shed_total"]} == {
        "overloaded", "expired"}

    assert cli(["fleet", "status", "--db", str(db), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert [s["device"] for s in status] == ["dev1"]
    s = status[0]
    assert s["records_stored"] == counters["escalations"] + counters["audits"]
    assert s["audits"] == counters["audits"] and s["alarms"] == 1
    assert s["escalation_rate"] == pytest.approx(counters["escalation_rate"])
    assert s["agreement_low"] <= s["agreement"] <= s["agreement_high"]
    assert cli(["fleet", "status", "--db", str(db)]) == 0
    assert "dev1" in capsys.readouterr().out

    out = tmp_path / "report"
    assert cli(["fleet", "report", "--db", str(db), "--out", str(out), "--bundle", str(path),
                "--window", "20"]) == 0
    text = (out / "fleet.md").read_text()
    assert "| dev1 |" in text and "agreement.png" in text
    for png in ("agreement.png", "escalation_rate.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_expectations_come_from_the_validation_reference(toy_bundle: Bundle) -> None:
    _, manifest = toy_bundle
    plain = expectations(manifest, 0)
    assert set(plain) == {"escalation_rate"} and plain["escalation_rate"].low is None
    name = manifest.operating_points[0].name
    ref = {name: {"escalation_rate": 0.2, "n_rows": 400, "local_agreement": 0.9,
                  "n_local": 320}}
    with_ref = expectations(dataclasses.replace(manifest, metadata={"drift_reference": ref}), 0)
    assert with_ref["agreement"].value == 0.9 and with_ref["escalation_rate"].value == 0.2
    low, high = with_ref["agreement"].low, with_ref["agreement"].high
    assert low is not None and high is not None and low < 0.9 < high


@pytest.mark.slow
def test_metrics_answer_during_a_hil_run(tmp_path: Path) -> None:
    """``simulate --hil``'s processes (a real mosquitto, ``cloud serve --db --metrics-port``,
    ``edge run --outbox --audit-fraction``): GETs during the run parse as Prometheus text."""
    bundle = tmp_path / "bundle"
    build_dataset_bundle(bundle, "wall-robot", n_sensors=4, escalate=0.4)
    port, db = free_port(), tmp_path / "fleet.db"
    scraped: list[dict[str, list[tuple[dict[str, str], float]]]] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            with contextlib.suppress(OSError):  # not up yet, or gone
                scraped.append(scrape(port))
            done.wait(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        hil = run_hil(bundle, "wall-robot", truth=load_dataset("wall-robot").split("test")[1],
                      scenario=Scenario(seed=2, devices=DevicesConfig(count=1, rate_hz=60,
                                                                      limit=180)),
                      options=HilOptions(devices=1, broker="mosquitto", workdir=tmp_path / "w",
                                         timeout_s=120, cloud_args=(
                                             "--db", str(db), "--metrics-port", str(port)),
                                         device_args=(
                                             "--outbox", str(tmp_path / "outbox-{device}"),
                                             "--audit-fraction", "0.2",
                                             "--telemetry-every", "0.5")))
    finally:
        done.set()
        poller.join(10)
    assert len(scraped) >= 3  # valid Prometheus text, several times during the run
    last = scraped[-1]
    assert last["adaptedge_cloud_requests_total"][0][1] > 0
    decisions = [v for labels, v in last["adaptedge_device_decisions_total"]
                 if labels["device"] == "dev-0"]
    assert decisions and 0 < decisions[0] <= 180
    escalated = int(np.sum(hil.columns.escalated))
    with FleetStore(db) as store:
        kinds = {kind: n for device, _, kind, n, _, _ in store.tallies() if device == "dev-0"}
    assert kinds["escalated"] == escalated and kinds["audit"] > 0
    assert not list((tmp_path / "outbox-dev-0").glob("*.msgpack"))


def test_status_of_a_missing_store_is_a_user_error(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["fleet", "status", "--db", str(tmp_path / "typo.db")]) == 2
    assert "no fleet store at" in capsys.readouterr().err
    assert not (tmp_path / "typo.db").exists()  # not created by looking
    assert cli(["fleet", "report", "--db", str(tmp_path / "x.db"), "--out", str(tmp_path),
                "--window", "0"]) == 2


def test_main_point_is_the_latest_not_the_most_common(tmp_path: Path) -> None:
    """A device that ran long at the default point (0) and now runs ``--budget B`` (point 2)
    is compared with point 2's figures; another bundle's records do not count."""
    from adaptedge.cloud.fleet.store.fleet_store import NewRecord
    from adaptedge.cloud.fleet.view import main_point

    def record(i: int, bundle: str, point: int | None) -> NewRecord:
        return NewRecord("dev1", i, i.to_bytes(16, "big"), bundle, "escalated", point, b"",
                         b"", 1, 1, None, float(i), float(i))

    with FleetStore(tmp_path / "fleet.db") as store:
        for i in range(10):
            store.add_record(record(i, "b1", 0))
        for i in range(10, 13):
            store.add_record(record(i, "b1", 2))
        store.add_record(record(13, "b2", 1))
        store.add_record(record(14, "b1", None))
        assert main_point(store, "dev1", "b1") == 2
        assert main_point(store, "dev1") == 1
        assert main_point(store, "dev2") is None
