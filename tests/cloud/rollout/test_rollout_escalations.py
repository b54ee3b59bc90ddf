"""Issue 31 item 1 (a): the README's rollout, one worker serving ``--bundle v1 --bundle v2``
while devices switch to v2, answers the escalations after the swap from the cloud. On a bundle
whose HPC takes 7 s to load, the worker used to load v2 at the first v2 request, count the 7 s
as compute and shed every later request of every device (100% degraded after the swap)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from adaptedge.protocol.bundle import read_manifest_body
from adaptedge.simulator.brokers import MosquittoBroker
from tests.cloud.rollout.test_announce import Fleet
from tests.support.ota_fleet import versioned_bundle
from tests.support.slow_load import slow_load

pytestmark = pytest.mark.broker


@pytest.fixture()
def fleet(mosquitto: MosquittoBroker, tmp_path: Path) -> Iterator[Fleet]:
    with ExitStack() as stack:
        yield Fleet(mosquitto, tmp_path, stack)


@pytest.mark.slow
def test_escalations_after_the_swap_are_answered_by_the_cloud(
        fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    v2 = fleet.tmp / "v2"
    b2 = versioned_bundle(v2, 2, fleet.keys, seed=2).bundle_id
    slow_load(monkeypatch, v2, 7.0)
    svc = fleet.cloud(v2)
    devices = [fleet.device(f"dev{i}").start(rate_hz=100, seed=i) for i in (1, 2)]
    assert all(d.wait_decisions(60) for d in devices)
    fleet.deploy(v2, ["dev1", "dev2"], probation_decisions=60, min_decisions=10,
                 max_degraded_rate=0.5)
    for dev in devices:
        assert dev.wait_state("active", b2, 60.0), dev.follower.statuses[-1]
    assert all(d.wait_decisions(400, timeout_s=60.0) for d in devices)
    for dev in devices:
        dev.stop.set()
        assert dev.thread is not None
        dev.thread.join(10)
    escalated = [r for d in devices for r in d.records
                 if r.bundle_id == b2 and r.source in ("cloud", "degraded")]
    cloud = sum(r.source == "cloud" for r in escalated)
    assert len(escalated) >= 200 and cloud >= 0.99 * len(escalated), \
        (cloud, len(escalated), svc.stats())
    assert read_manifest_body(fleet.v1)["bundle_id"] in svc.inference.loaded  # type: ignore[union-attr]
