"""Issue 15 item 1 (cloud side): a reused request id never gets another input's answer, and
an error never replaces a cached answer. Through a real mosquitto."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import numpy as np
import pytest

from adaptedge.cloud import CloudService, HpcInference
from adaptedge.cloud.service.dedup import (
    PENDING,
    REUSED,
    RecentRequests,
    content_digest,
    content_key,
)
from adaptedge.protocol import ErrorReply, InferenceReply, Manifest, encode
from adaptedge.protocol import errors as E
from adaptedge.simulator.brokers import MosquittoBroker
from tests.attacks.cloud_helpers import device, request, send
from tests.support.toy_bundle import build_toy_bundle

pytestmark = pytest.mark.broker


@pytest.fixture()
def served(tmp_path: Path, mosquitto: MosquittoBroker
           ) -> Iterator[tuple[Path, Manifest, MosquittoBroker, CloudService]]:
    manifest = build_toy_bundle(tmp_path / "toy")
    svc = CloudService(tmp_path / "toy", mosquitto.url, client_id="worker-dedup")
    svc.start()
    try:
        yield tmp_path / "toy", manifest, mosquitto, svc
    finally:
        svc.stop()


def test_a_reused_id_with_other_features_is_answered_for_its_own_features(
        served: tuple[Path, Manifest, MosquittoBroker, CloudService]) -> None:
    path, manifest, broker, svc = served
    reference = HpcInference.load(path)
    first, second = request(manifest, 7, [3.0, -2.0, 1.0]), request(manifest, 7, [-3.0, 2.0, -1.0])
    expected = [r.probability_array() for r in reference.handle_batch([first, second])]  # type: ignore[union-attr]
    assert not np.array_equal(expected[0], expected[1])
    dev = device(broker.url)
    send(dev, first)
    assert dev.pump(5.0, lambda: len(dev.replies.get(7, [])) == 1)
    send(dev, second)  # a reboot with the clock set back: same id, another input
    assert dev.pump(5.0, lambda: len(dev.replies.get(7, [])) == 2)
    replies = [reply for _, reply in dev.replies[7]]
    assert all(isinstance(r, InferenceReply) for r in replies)
    np.testing.assert_array_equal(replies[0].probability_array(), expected[0])  # type: ignore[union-attr]
    np.testing.assert_array_equal(replies[1].probability_array(), expected[1])  # type: ignore[union-attr]
    send(dev, second)  # a retry of the second input: the cached answer, computed once
    assert dev.pump(5.0, lambda: len(dev.replies.get(7, [])) == 3)
    assert encode(dev.replies[7][2][1]) == encode(dev.replies[7][1][1])
    assert svc.inference.answered == 2
    dev.close()


def test_an_error_with_the_id_of_an_answered_request_does_not_replace_its_answer(
        served: tuple[Path, Manifest, MosquittoBroker, CloudService]) -> None:
    _, manifest, broker, _ = served
    dev = device(broker.url)
    valid = encode(request(manifest, 9, [1.0, 2.0, 3.0]))
    dev.send(valid)
    assert dev.pump(5.0, lambda: len(dev.replies.get(9, [])) == 1)
    # The same id with a NaN measured value: refused (non_finite) with the salvaged id 9.
    dev.send(encode(request(manifest, 9, [float("nan"), 2.0, 3.0])))
    assert dev.pump(5.0, lambda: len(dev.replies.get(9, [])) == 2)
    error = dev.replies[9][1][1]
    assert isinstance(error, ErrorReply) and error.code == E.NON_FINITE
    dev.send(valid)  # the valid request's retry still gets its answer
    assert dev.pump(5.0, lambda: len(dev.replies.get(9, [])) == 3)
    retry = dev.replies[9][2][1]
    assert isinstance(retry, InferenceReply)
    assert encode(retry) == encode(dev.replies[9][0][1])
    dev.close()


def test_the_cache_compares_content_and_keeps_only_answers(tmp_path: Path) -> None:
    manifest = build_toy_bundle(tmp_path / "toy")
    a, b = request(manifest, 1, [1.0, 2.0, 3.0]), request(manifest, 1, [1.0, 2.0, 4.0])
    da, db = content_digest(a), content_digest(b)
    assert da != db and da == content_digest(request(manifest, 1, [1.0, 2.0, 3.0], sent_at=0.0))
    recent = RecentRequests()
    assert recent.seen("d", 1, da) is None
    assert recent.seen("d", 1, da) is PENDING
    assert recent.seen("d", 1, db) is REUSED  # two replies with one id could not be told apart
    recent.failed("d", 1, da)  # an error is not cached: a retry computes again
    assert recent.seen("d", 1, da) is None
    recent.answered("d", 1, da, b"answer-a")
    recent.failed("d", 1, da)  # ... and never replaces an answer
    assert recent.seen("d", 1, da) == b"answer-a"
    assert recent.seen("d", 1, db) is None  # answered id, new content: computed for itself
    recent.answered("d", 1, da, b"stale")  # a late answer for the old content is not kept
    recent.answered("d", 1, db, b"answer-b")
    assert recent.seen("d", 1, db) == b"answer-b"


def test_the_content_key_tells_contents_apart_without_holding_large_ones(tmp_path: Path) -> None:
    manifest = build_toy_bundle(tmp_path / "toy")
    a, b = request(manifest, 1, [1.0, 2.0, 3.0]), request(manifest, 1, [1.0, 2.0, 4.0])
    again = request(manifest, 2, [1.0, 2.0, 3.0], sent_at=0.0)
    assert content_key(a) == content_key(again) and content_key(a) != content_key(b)
    assert content_key(msgspec.structs.replace(a, bundle_id="other")) != content_key(a)
    big = msgspec.structs.replace(a, features=bytes(2048), mask=b"\xff" * 16)
    assert content_key(big) == content_digest(big)  # large content: 16 bytes held, not 2 KB
    assert content_key(msgspec.structs.replace(big, features=bytes(2047) + b"\x01")) \
        != content_key(big)
