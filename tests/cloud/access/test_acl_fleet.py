"""The store channels under the ACL of ``adaptedge cloud acl`` in a real mosquitto: a device
forwards only its own records, the store account labels and acknowledges them."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest

from adaptedge.cli.main import main as cli
from adaptedge.cloud.access.acl import acl_text, read_password_file
from adaptedge.cloud.fleet.ingest import StoreIngest
from adaptedge.cloud.fleet.store import FleetStore
from adaptedge.cloud.service.inference import HpcInference
from adaptedge.edge import MqttUplink, Outbox
from adaptedge.edge.drain import OutboxDrainer
from adaptedge.edge.outbox import read_record
from adaptedge.protocol import Manifest
from adaptedge.protocol.codec import encode
from adaptedge.protocol.store_wire import StoreRecord, encode_record
from adaptedge.protocol.topics import topic
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.fleet import offline_outbox, wait_until

pytestmark = pytest.mark.broker
Bundle = tuple[Path, Manifest]


def test_acl_text_confines_the_store_channels() -> None:
    text = acl_text(["dev1"], ["svc"], store_users=["svc-store"])
    assert "user svc-store\ntopic read adaptedge/v1/+/store\ntopic write adaptedge/v1/+/stored" \
        in text
    assert "topic write adaptedge/v1/dev1/store\ntopic read adaptedge/v1/dev1/stored" in text
    assert "topic read adaptedge/v1/+/store" not in text.split("user svc\n")[1].split("\n\n")[0]


def test_devices_forward_only_their_own_records(toy_bundle: Bundle, tmp_path: Path) -> None:
    path, _ = toy_bundle
    creds = tmp_path / "creds"
    assert cli(["cloud", "acl", "--devices", "dev1,dev2", "--out", str(creds),
                "--workers", "2"]) == 0
    assert (creds / "secrets" / "adaptedge-cloud-2-store").exists()
    secret = creds / "secrets"
    n = offline_outbox(path, tmp_path / "outbox", 200)
    foreign = read_record(Outbox(tmp_path / "outbox").oldest(1)[0])[2]
    with MosquittoBroker(password_file=creds / "passwd", acl_file=creds / "acl") as broker:
        store = FleetStore(tmp_path / "fleet.db")
        ingest = StoreIngest(HpcInference.load(path), store, broker.url,
                             client_id="adaptedge-cloud-store", username="adaptedge-cloud-store",
                             password=read_password_file(secret / "adaptedge-cloud-store"))
        uplink = MqttUplink(broker.url, "dev1", username="dev1",
                            password=read_password_file(secret / "dev1")).start()
        ingest.start()
        try:
            assert uplink.wait_connected(10.0), uplink.last_error
            drainer = OutboxDrainer(Outbox(tmp_path / "outbox"), uplink, "dev1")
            assert drainer.drain(30.0), drainer.counters
            assert drainer.counters["drain_stored"] == n == store.count_records("dev1")
            # dev1 speaking for dev2: on dev2's topic the broker drops it, on its own topic
            # the cloud refuses it (the record names another device).
            as_dev2 = encode_record(StoreRecord("audit", 0, encode(
                msgspec.structs.replace(foreign, device="dev2"))))
            received = ingest.counts["records"]
            assert uplink.publish(topic("dev2", "store"), as_dev2, qos=1)
            assert uplink.publish(topic("dev1", "store"), as_dev2, qos=1)
            wait_until(lambda: ingest.counts["records"] > received, 5.0, "the second copy")
            time.sleep(0.3)
        finally:
            uplink.close()
            ingest.stop()
    assert ingest.counts["records"] == received + 1 and ingest.counts["refused"] == 1
    assert store.count_records("dev2") == 0 and store.count_records() == n


def test_cloud_serve_finds_the_store_account_of_its_worker(tmp_path: Path) -> None:
    import argparse

    from adaptedge.cli.fleet_serve import _store_login

    creds = tmp_path / "creds"
    assert cli(["cloud", "acl", "--devices", "dev1", "--out", str(creds), "--workers", "2"]) == 0
    secret = creds / "secrets"
    args = argparse.Namespace(username="adaptedge-cloud-2",
                              password_file=str(secret / "adaptedge-cloud-2"),
                              store_username=None, store_password_file=None)
    assert _store_login(args) == ("adaptedge-cloud-2-store",
                                  read_password_file(secret / "adaptedge-cloud-2-store"))
    args.username, args.password_file = None, None
    assert _store_login(args) == (None, None)  # no credentials: an open broker
