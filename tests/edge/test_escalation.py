"""Device failover over several brokers: the uplink moves to the next broker when its broker
dies, subscribes again and resends what is still inside its deadline (mosquitto)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from adaptedge.cloud import CloudService
from adaptedge.edge.errors import UplinkConfigError
from adaptedge.edge.mqtt_uplink import MqttUplink, parse_broker_urls
from adaptedge.protocol import InferenceReply, InferenceRequest, Manifest
from adaptedge.protocol.features import pack_features
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.toy_bundle import build_toy_bundle


def request(manifest: Manifest, rid: int, deadline_s: float) -> InferenceRequest:
    feats, mask = pack_features([1.0, 2.0, 3.0], [True] * 3)
    return InferenceRequest(rid, "dev1", manifest.bundle_id, time.time(), deadline_s * 1000.0,
                            feats, mask)


def test_broker_lists_parse_and_refuse_mixed_tls() -> None:
    assert parse_broker_urls("mqtt://a:1,b:2") == [("a", 1, False), ("b", 2, False)]
    assert parse_broker_urls(["mqtts://a", "ssl://b:1"]) == [("a", 8883, True), ("b", 1, True)]
    with pytest.raises(UplinkConfigError, match="mixes TLS"):
        parse_broker_urls("mqtt://a,mqtts://b")
    with pytest.raises(UplinkConfigError, match="no broker"):
        parse_broker_urls(" , ")
    with pytest.raises(UplinkConfigError, match="qos"):
        MqttUplink("mqtt://a", "d", qos=2)


@pytest.mark.broker
def test_the_uplink_fails_over_and_resends_what_is_still_in_time(tmp_path: Path) -> None:
    manifest = build_toy_bundle(tmp_path / "toy")
    with MosquittoBroker() as first, MosquittoBroker() as second:
        served = CloudService(tmp_path / "toy", second.url, client_id="w2", stats_every_s=3600)
        served.start()
        idle = CloudService(tmp_path / "toy", first.url, client_id="w1", stats_every_s=3600)
        idle.start()
        uplink = MqttUplink(f"{first.url},{second.url}", "dev1", reconnect_min_s=0.05,
                            reconnect_max_s=0.2).start()
        try:
            assert uplink.wait_connected(10.0) and uplink.port == first.port
            reply = uplink.exchange(request(manifest, 1, 5.0), time.monotonic() + 5.0)
            assert isinstance(reply, InferenceReply)
            idle.stop()  # the first broker now takes requests but nobody answers them
            answers: list[object] = []
            waiting = threading.Thread(target=lambda: answers.append(uplink.exchange(
                request(manifest, 2, 8.0), time.monotonic() + 8.0)))
            waiting.start()
            time.sleep(0.3)  # request 2 acknowledged by the first broker, unanswered
            first.stop()
            waiting.join(10.0)
            assert answers and isinstance(answers[0], InferenceReply), answers
            assert answers[0].request_id == 2
            assert uplink.port == second.port
            counters = uplink.counters
            assert counters["failovers"] >= 1 and counters["resent"] == 1, counters
            reply = uplink.exchange(request(manifest, 3, 5.0), time.monotonic() + 5.0)
            assert isinstance(reply, InferenceReply)
            # The worker counts a reply after writing it: the count may trail the reply a little.
            counted = time.monotonic() + 5.0
            while served.stats()["replies"] < 2 and time.monotonic() < counted:
                time.sleep(0.01)
            assert served.stats()["replies"] == 2
        finally:
            uplink.close()
            served.stop()
            idle.stop()
