"""The worker's MQTT transport acknowledges requests itself (paho's manual acks, so that a
request's PUBACK follows its reply): every request must still be acknowledged, or a broker
that bounds what it has in flight to a client stops delivering. Through a real mosquitto
with mosquitto's default bound of 20 messages in flight."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.cloud import CloudService
from adaptedge.protocol import InferenceReply
from adaptedge.simulator.brokers import MosquittoBroker
from tests.attacks.cloud_helpers import device, request, send
from tests.support.toy_bundle import build_toy_bundle

IN_FLIGHT = 20


class BoundedBroker(MosquittoBroker):
    """mosquitto with its default ``max_inflight_messages`` (the fixture's is unbounded)."""

    def config_text(self) -> str:
        return super().config_text().replace("max_inflight_messages 0",
                                             f"max_inflight_messages {IN_FLIGHT}")


@pytest.mark.broker
def test_every_request_is_acknowledged_so_a_bounded_broker_keeps_delivering(
        tmp_path: Path) -> None:
    manifest = build_toy_bundle(tmp_path / "toy")
    with BoundedBroker() as broker:
        assert f"max_inflight_messages {IN_FLIGHT}" in broker.config_text()
        svc = CloudService(tmp_path / "toy", broker.url, client_id="worker-acks")
        svc.start()
        try:
            dev = device(broker.url)
            n = 15 * IN_FLIGHT
            for rid in range(n):  # a burst, then one at a time (lone requests)
                send(dev, request(manifest, rid, [0.01 * rid, 1.0, 2.0]))
            assert dev.pump(30.0, lambda: len(dev.replies) >= n), len(dev.replies)
            for rid in range(n, n + 2 * IN_FLIGHT):
                send(dev, request(manifest, rid, [0.01 * rid, 1.0, 2.0]))
                assert dev.pump(5.0, lambda r=rid: dev.answered(r)), rid  # type: ignore[misc]
            assert all(isinstance(replies[0][1], InferenceReply)
                       for replies in dev.replies.values())
            dev.close()
        finally:
            svc.stop()
        assert svc.stats()["received"] == n + 2 * IN_FLIGHT
