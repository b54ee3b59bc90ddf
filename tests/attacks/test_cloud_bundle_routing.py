"""Issue 31 item 3: workers serving different bundles in one `$share` group (or one NATS queue
group) must not answer each other's devices ``unknown_bundle``. Through a real mosquitto:
two workers with different bundles and devices of both (bundle-scoped topics, and older
devices on the plain request topic); a rolling upgrade (a v1 worker, then a v2 worker added)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptedge.cloud.service.worker import CloudService
from adaptedge.cloud.transport.client import RequestClient
from adaptedge.edge.mqtt_uplink import MqttUplink
from adaptedge.protocol import ErrorReply, InferenceReply, Manifest, encode
from adaptedge.protocol.topics import bundle_segment, parse, request_topic
from adaptedge.simulator.brokers import MosquittoBroker
from tests.attacks.cloud_helpers import request
from tests.support.toy_bundle import build_toy_bundle

pytestmark = pytest.mark.broker
PER_DEVICE = 20


@pytest.fixture()
def bundles(tmp_path: Path) -> tuple[tuple[Path, Manifest], tuple[Path, Manifest]]:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    m1, m2 = build_toy_bundle(v1, seed=1), build_toy_bundle(v2, seed=2)
    assert m1.bundle_id != m2.bundle_id
    return (v1, m1), (v2, m2)


@pytest.fixture()
def broker() -> Iterator[MosquittoBroker]:
    with MosquittoBroker() as b:
        yield b


def worker(bundle: Path, url: str, name: str) -> CloudService:
    service = CloudService(bundle, url, client_id=name, share="on", stats_every_s=60.0)
    service.start()
    return service


def new_device_answers(url: str, name: str, manifest: Manifest) -> Counter[str]:
    """A current device (``MqttUplink``, bundle-scoped topic): how its requests were answered."""
    outcomes: Counter[str] = Counter()
    with MqttUplink(url, name) as uplink:
        assert uplink.wait_connected(5.0)
        time.sleep(0.2)  # the reply subscription is on its way with the CONNACK's callback
        for rid in range(PER_DEVICE):
            reply = uplink.exchange(request(manifest, rid, [0.1, 0.2, 0.3], name),
                                    time.monotonic() + 5.0)
            outcomes[_outcome(reply, manifest)] += 1
    return outcomes


def old_device_answers(url: str, name: str, manifest: Manifest) -> Counter[str]:
    """An older device: requests on the plain ``<prefix>/v1/<device>/req`` topic."""
    client = RequestClient(url, name)
    client.connect()
    try:
        for rid in range(PER_DEVICE):
            client.send(encode(request(manifest, rid, [0.1, 0.2, 0.3], name)))
        client.pump(10.0, lambda: all(client.answered(r) for r in range(PER_DEVICE)))
        return Counter(_outcome(client.replies[r][0][1] if client.answered(r) else None,
                                manifest) for r in range(PER_DEVICE))
    finally:
        client.close()


def _outcome(reply: object, manifest: Manifest) -> str:
    if isinstance(reply, InferenceReply):
        return "answered" if reply.bundle_id == manifest.bundle_id else "wrong_bundle"
    if isinstance(reply, ErrorReply):
        return reply.code
    return "none"


def test_request_topics_name_the_bundle() -> None:
    assert request_topic("d1", bundle_id="lb-v1") == "adaptedge/v1/d1/req/lb-v1"
    dotted = request_topic("d1", bundle_id="heart 1.2/x")  # no '.', ' ' or '/' in a segment
    assert parse(dotted).bundle == bundle_segment("heart 1.2/x")
    assert set(bundle_segment("heart 1.2/x")[1:]) <= set("0123456789abcdef")
    assert parse("adaptedge/v1/d1/req").bundle is None


def test_workers_of_different_bundles_answer_only_their_own(
        broker: MosquittoBroker, bundles: tuple[tuple[Path, Manifest], tuple[Path, Manifest]]
) -> None:
    (v1, m1), (v2, m2) = bundles
    services = [worker(v1, broker.url, "w-v1"), worker(v2, broker.url, "w-v2")]
    try:
        for kind in (new_device_answers, old_device_answers):
            for name, manifest in (("dev-a", m1), ("dev-b", m2)):
                outcomes = kind(broker.url, f"{name}-{kind.__name__[:3]}", manifest)
                assert outcomes == Counter(answered=PER_DEVICE), (kind.__name__, outcomes)
        stats = [s.stats() for s in services]
        assert all(s.get("error.unknown_bundle", 0) == 0 for s in stats), stats
        assert sum(s["forwarded"] for s in stats) > 0  # old devices' requests were routed on
    finally:
        for service in services:
            service.stop()


def test_rolling_upgrade_answers_both_bundles(
        broker: MosquittoBroker, bundles: tuple[tuple[Path, Manifest], tuple[Path, Manifest]]
) -> None:
    (v1, m1), (v2, m2) = bundles
    services = [worker(v1, broker.url, "w-old")]
    try:
        assert new_device_answers(broker.url, "dev-a", m1) == Counter(answered=PER_DEVICE)
        services.append(worker(v2, broker.url, "w-new"))  # the upgrade: v2 joins the group
        for name, manifest in (("dev-a", m1), ("dev-b", m2), ("dev-c", m1)):
            assert new_device_answers(broker.url, name, manifest) == Counter(answered=PER_DEVICE)
            assert old_device_answers(broker.url, f"{name}-old", manifest) == \
                Counter(answered=PER_DEVICE)
        assert all(s.stats().get("error.unknown_bundle", 0) == 0 for s in services)
    finally:
        for service in services:
            service.stop()
