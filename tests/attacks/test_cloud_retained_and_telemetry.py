"""Issue 15 item 14 (cloud side): a retained request is not answered again by a worker that
(re)subscribes, and device telemetry is recorded only from the device its topic names.
Through a real mosquitto."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from adaptedge.cloud import CloudService
from adaptedge.protocol import InferenceReply, Telemetry, encode
from adaptedge.protocol.topics import telemetry_topic
from adaptedge.simulator.brokers import MosquittoBroker
from tests.attacks.cloud_helpers import device, request
from tests.support.toy_bundle import build_toy_bundle

pytestmark = pytest.mark.broker


def test_a_retained_request_is_answered_once_not_again_after_a_worker_restart(
        tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    manifest = build_toy_bundle(tmp_path / "toy")
    first = CloudService(tmp_path / "toy", mosquitto.url, client_id="worker-a")
    first.start()
    dev = device(mosquitto.url)
    try:
        info = dev.client.publish(dev.request_topic, encode(request(manifest, 1, [1.0, 2, 3])),
                                  qos=1, retain=True)  # stays on the broker
        assert info.rc == 0
        assert dev.pump(5.0, lambda: dev.answered(1))
        assert isinstance(dev.replies[1][0][1], InferenceReply)
    finally:
        first.stop()
    second = CloudService(tmp_path / "toy", mosquitto.url, client_id="worker-b")
    second.start()  # subscribing delivers the retained copy (retain flag set)
    try:
        dev.pump(1.0)
        assert len(dev.replies[1]) == 1, "the retained request was answered again"
        assert second.stats()["retained_ignored"] == 1
        dev.send(encode(request(manifest, 2, [1.0, 2, 3])))
        assert dev.pump(5.0, lambda: dev.answered(2))  # live requests are still answered
    finally:
        second.stop()
        dev.close()


def test_telemetry_whose_source_is_not_its_topics_device_is_dropped_and_counted(
        tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    build_toy_bundle(tmp_path / "toy")
    svc = CloudService(tmp_path / "toy", mosquitto.url, client_id="worker-t",
                       collect_telemetry=True)
    svc.start()
    try:
        dev = device(mosquitto.url, "dev1")
        topic = telemetry_topic("dev1")
        dev.send(encode(Telemetry("dev2", time.time(), {"decisions": 1e9})), topic=topic)
        dev.send(encode(Telemetry("dev1", time.time(), {"decisions": 5.0})), topic=topic)
        deadline = time.monotonic() + 5.0
        while ("dev1" not in svc.telemetry.latest or svc.telemetry.mismatched < 1) and \
                time.monotonic() < deadline:
            dev.pump(0.05)
        assert svc.telemetry.mismatched == 1
        assert set(svc.telemetry.latest) >= {"dev1"} and "dev2" not in svc.telemetry.latest
        assert svc.telemetry.latest["dev1"].counters == {"decisions": 5.0}
        assert svc.stats()["telemetry_mismatched"] == 1
        dev.close()
    finally:
        svc.stop()
