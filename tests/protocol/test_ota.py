"""OTA wire messages, bundle versions, the cloud's bundle pool, QoS 0 loss framing."""

from __future__ import annotations

import hashlib
import random
import time
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cloud.access.acl import acl_text
from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.rollout.announce import build_image
from adaptedge.cloud.rollout.status import RolloutWatch, render
from adaptedge.cloud.service.bundle_pool import BundlePool, bundle_paths
from adaptedge.protocol import errors as E
from adaptedge.protocol.bundle import read_manifest, verify
from adaptedge.protocol.bundle_digest import SIGNATURE_NAME
from adaptedge.protocol.bundle_version import bundle_version, stamp_version
from adaptedge.protocol.errors import BundleError, ProtocolError
from adaptedge.protocol.features import pack_features
from adaptedge.protocol.messages import InferenceReply, InferenceRequest
from adaptedge.protocol.ota import (
    ChunkReply,
    ChunkRequest,
    UpdateAnnouncement,
    UpdateStatus,
    chunk_hashes,
    decode_ota,
    encode_ota,
)
from adaptedge.simulator.mqtt_loss import PublishDropper
from tests.support.ota_fleet import new_keys, versioned_bundle


def _announcement(**kw: object) -> UpdateAnnouncement:
    data = bytes(range(256)) * 40
    fields: dict[str, object] = dict(
        rollout="r1", bundle_id="abc", version=2, size=len(data),
        sha256=hashlib.sha256(data).digest(), chunk_size=4096,
        chunk_hashes=chunk_hashes(data, 4096), issued_at=1.0)
    fields.update(kw)
    return UpdateAnnouncement(**fields)  # type: ignore[arg-type]


def test_ota_messages_round_trip_and_bad_ones_are_refused() -> None:
    messages = [_announcement(), ChunkRequest("dev1", "abc", 3),
                ChunkReply("abc", 3, b"xyz"), ChunkReply("abc", 4, b"", "no such chunk"),
                UpdateStatus("dev1", 2.0, "rolled_back", "abc", "old", 1, reason="why")]
    for message in messages:
        assert decode_ota(encode_ota(message)) == message
    with pytest.raises(ProtocolError, match="needs 3 chunk hashes, not 2"):
        decode_ota(encode_ota(_announcement(chunk_hashes=_announcement().chunk_hashes[:2])))
    with pytest.raises(ProtocolError, match="not file://"):
        decode_ota(encode_ota(_announcement(url="ftp://x")))
    with pytest.raises(ProtocolError, match="state 'weird'"):
        decode_ota(encode_ota(UpdateStatus("d", 1.0, "weird", "a", "b", 0)))
    for junk in (b"", b"\x93\x01\x02", b"\xc1" * 10):
        with pytest.raises(ProtocolError) as err:
            decode_ota(junk)
        assert err.value.code == E.DECODE_FAILED
    with pytest.raises(ProtocolError) as err:
        decode_ota(b"\x00" * (1 << 20))
    assert err.value.code == E.TOO_LARGE


def test_versions_are_signed_manifest_content(tmp_path: Path) -> None:
    keys = new_keys(tmp_path / "keys")
    before = versioned_bundle(tmp_path / "b", 0, keys)
    assert bundle_version(before) == 0
    after = stamp_version(tmp_path / "b", 7)
    assert bundle_version(after) == 7 and after.bundle_id != before.bundle_id
    assert not (tmp_path / "b" / SIGNATURE_NAME).exists()  # it signed the old id
    assert verify(tmp_path / "b").bundle_id == after.bundle_id
    with pytest.raises(BundleError, match="bundle_version"):
        bundle_version({"metadata": {"bundle_version": "7"}})
    with pytest.raises(BundleError):
        stamp_version(tmp_path / "b", -1)


def _request(bundle_id: str, rid: int) -> InferenceRequest:
    features, mask = pack_features(np.ones(3, np.float32), np.ones(3, bool))
    return InferenceRequest(request_id=rid, device="dev1", bundle_id=bundle_id,
                            sent_at=time.time(), deadline_ms=1000.0, features=features,
                            mask=mask)


def test_the_pool_answers_each_bundle_with_its_own_hpc_and_bounds_what_is_loaded(
        tmp_path: Path) -> None:
    ids = [versioned_bundle(tmp_path / "dir" / f"b{v}", v, None, seed=v).bundle_id
           for v in (1, 2, 3)]
    pool = BundlePool(bundle_paths([], [tmp_path / "dir"]), max_loaded=2)
    try:
        assert pool.bundle_ids[:3] == tuple(ids) and pool.loaded == (ids[0], ids[1])  # preloaded
        assert len(pool.bundle_ids) == 6  # each also answers its all-points device bundle
        replies = pool.handle_batch([_request(ids[1], 1), _request("nope", 2),
                                     _request(ids[0], 3), _request(ids[2], 4)])
        assert [type(r).__name__ for r in replies] == ["InferenceReply", "ErrorReply",
                                                       "InferenceReply", "InferenceReply"]
        assert all(isinstance(r, InferenceReply) and r.bundle_id == b
                   for r, b in zip([replies[0], replies[2], replies[3]],
                                   [ids[1], ids[0], ids[2]], strict=True))
        assert replies[1].code == E.UNKNOWN_BUNDLE  # type: ignore[union-attr]
        assert pool.error_counts[E.UNKNOWN_BUNDLE] == 1
        assert ids[0] in pool.loaded and len(pool.loaded) == 2  # the default is never evicted
        assert pool.evictions == 1 and pool.loads == 3
    finally:
        pool.close()
    with pytest.raises(CloudError, match="no bundle given"):
        bundle_paths([], [])
    keys = new_keys(tmp_path / "keys")
    with pytest.raises(BundleError, match="is not signed"):  # checked at start, not first use
        BundlePool([tmp_path / "dir" / "b1"], trust=[keys.public])
    pool = BundlePool([tmp_path / "dir" / "b1", tmp_path / "dir" / "b2"], max_loaded=1)  # b2 lazily
    try:
        (tmp_path / "dir" / "b2" / "hpc.onnx").write_bytes(b"changed after start")
        reply = pool.handle_batch([_request(ids[1], 5)])[0]
        assert reply.code == E.UNKNOWN_BUNDLE and ids[1] in pool.failed
    finally:
        pool.close()


def test_images_are_deterministic_and_statuses_are_read_per_device(tmp_path: Path) -> None:
    versioned_bundle(tmp_path / "b", 3, None)
    one = build_image(tmp_path / "b", tmp_path / "x", chunk_size=1000)
    two = build_image(tmp_path / "b", tmp_path / "y", chunk_size=1000)
    assert one.sha256 == two.sha256 and one.version == 3
    assert list(one.chunk_hashes) == chunk_hashes(one.path.read_bytes(), 1000)
    assert read_manifest(tmp_path / "b").bundle_id == one.bundle_id
    watch = RolloutWatch()
    ann = _announcement(bundle_id=one.bundle_id)
    watch.accept("adaptedge/v1/dev1/update", encode_ota(ann))
    watch.accept("adaptedge/v1/dev2/update", encode_ota(ann))
    lie = UpdateStatus("dev1", 5.0, "active", one.bundle_id, one.bundle_id, 3)
    watch.accept("adaptedge/v1/dev2/telemetry", encode_ota(lie))  # dev2 speaking for dev1
    watch.accept("adaptedge/v1/dev1/telemetry", encode_ota(UpdateStatus(
        "dev1", 6.0, "refused", one.bundle_id, "old", 1, reason="older: no downgrade")))
    rows = {r["device"]: r for r in watch.rows(one.bundle_id)}
    assert rows["dev1"]["state"] == "refused" and rows["dev2"]["state"] == "announced"
    assert "older: no downgrade" in render(list(rows.values()))


def test_acl_covers_the_update_channels() -> None:
    text = acl_text(["dev1"], "svc")
    for line in ("topic read adaptedge/v1/dev1/update", "topic write adaptedge/v1/dev1/fetch",
                 "topic read adaptedge/v1/dev1/chunk", "topic write adaptedge/v1/+/update",
                 "topic read adaptedge/v1/+/fetch", "topic write adaptedge/v1/+/chunk"):
        assert line in text.splitlines()


def test_the_loss_model_drops_whole_qos0_publishes_only() -> None:
    def publish(qos: int, body: bytes) -> bytes:
        return bytes([0x30 | qos << 1, len(body)]) + body

    stream = b"".join(publish(i % 2, bytes([i % 256]) * 20) for i in range(400))
    dropper = PublishDropper(0.5, random.Random(1))
    out = b"".join(dropper.feed(stream[i:i + 7]) for i in range(0, len(stream), 7))
    assert dropper.passed + dropper.dropped == 200 and 60 < dropper.dropped < 140
    kept = [out[i:i + 22] for i in range(0, len(out), 22)]
    assert all(p[0] in (0x30, 0x32) for p in kept)  # whole packets, stream still framed
    assert sum(p[0] == 0x32 for p in kept) == 200  # every QoS 1 publish went through


def test_a_fraction_picks_the_same_devices_for_the_same_rollout() -> None:
    from adaptedge.cli.fleet_rollout import choose_devices

    fleet = [f"dev{i}" for i in range(40)]
    first = choose_devices(fleet, 0.1, "canary-1")
    assert len(first) == 4 and first == choose_devices(list(reversed(fleet)), 0.1, "canary-1")
    assert first != choose_devices(fleet, 0.1, "canary-2")
    assert len(choose_devices(fleet[:3], 0.01, "x")) == 1  # at least one
