"""Issue 15 item 9: one device's features cannot fail a whole micro-batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.cloud import CloudService, HpcInference
from adaptedge.protocol import ErrorReply, InferenceReply
from adaptedge.protocol import errors as E
from adaptedge.simulator.brokers import MosquittoBroker
from tests.attacks.cloud_helpers import device, request, send
from tests.support.toy_bundle import build_toy_bundle


def test_finite_huge_features_fail_only_their_own_row(tmp_path: Path) -> None:
    manifest = build_toy_bundle(tmp_path / "toy")
    hpc = HpcInference.load(tmp_path / "toy")
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(8, 3)).tolist()
    rows[5] = [3e38, 3e38, -3e38]  # finite float32, but the HPC's output is not
    batch = [request(manifest, i, row, f"dev{i}") for i, row in enumerate(rows)]
    replies = hpc.handle_batch(batch)
    alone = [hpc.handle_batch([r])[0] for r in batch]
    for i, (reply, single) in enumerate(zip(replies, alone, strict=True)):
        if i == 5:
            assert isinstance(reply, ErrorReply) and reply.code == E.INTERNAL
            assert reply.device == "dev5" and reply.request_id == 5
        else:
            assert isinstance(reply, InferenceReply), (i, reply)
            np.testing.assert_array_equal(reply.probability_array(), single.probability_array())  # type: ignore[union-attr]


@pytest.mark.broker
def test_through_the_broker_a_burst_with_one_huge_row_is_answered_for_the_rest(
        tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    manifest = build_toy_bundle(tmp_path / "toy")
    svc = CloudService(tmp_path / "toy", mosquitto.url, client_id="worker-iso", max_batch=64,
                       max_wait_ms=50.0)
    svc.start()
    try:
        dev = device(mosquitto.url)
        for i in range(200):
            send(dev, request(manifest, i, [3e38, 3e38, -3e38] if i == 100 else [0.1 * i, 1, 2]))
        assert dev.pump(10.0, lambda: all(i in dev.replies for i in range(200)))
        codes = {i: getattr(dev.replies[i][0][1], "code", "answer") for i in range(200)}
        assert codes.pop(100) == E.INTERNAL
        assert set(codes.values()) == {"answer"}
        dev.close()
    finally:
        svc.stop()
