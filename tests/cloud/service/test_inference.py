"""HpcInference in-process (no broker): validation codes, batching parity, payload routing."""

from __future__ import annotations

import time
from pathlib import Path

import msgpack
import numpy as np
import onnxruntime as ort
import pytest

from adaptedge.cloud import CloudError, HpcInference
from adaptedge.cloud.service.batcher import MicroBatch
from adaptedge.cloud.service.dedup import PENDING, RecentRequests
from adaptedge.cloud.service.single_row import first_argmax
from adaptedge.protocol import (
    ErrorReply,
    InferenceReply,
    InferenceRequest,
    Manifest,
    Telemetry,
    decode,
    encode,
    pack_features,
)
from adaptedge.protocol import errors as E
from adaptedge.protocol.messages import TYPE_REQUEST, kind
from tests.support.toy_bundle import build_toy_bundle

TOPIC = "adaptedge/v1/dev1/req"


@pytest.fixture()
def bundle(tmp_path: Path) -> tuple[Path, Manifest]:
    out = tmp_path / "toy"
    return out, build_toy_bundle(out)


def request(manifest: Manifest, rid: int, values: list[float], measured: list[bool] | None = None,
            *, device: str = "dev1", bundle_id: str | None = None) -> InferenceRequest:
    feats, mask = pack_features(values, [True] * len(values) if measured is None else measured)
    return InferenceRequest(rid, device, bundle_id or manifest.bundle_id, time.time(), 250.0,
                            feats, mask)


def other_version(payload: bytes) -> bytes:
    """The same message claiming schema version 99 (the envelope's first element)."""
    obj = msgpack.unpackb(payload)
    obj[0] = kind(TYPE_REQUEST, 99)
    return bytes(msgpack.packb(obj))


def reference_probabilities(bundle_dir: Path, manifest: Manifest, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(str(bundle_dir / manifest.hpc.file),
                                providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(["probabilities"], {"x": x.astype(np.float32)})[0])


def test_batch_matches_row_by_row_reference(bundle: tuple[Path, Manifest]) -> None:
    path, manifest = bundle
    inf = HpcInference.load(path)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    replies = inf.handle_batch([request(manifest, i, row.tolist()) for i, row in enumerate(x)])
    expected = reference_probabilities(path, manifest, x)
    assert [r.request_id for r in replies] == list(range(40))
    for reply, probs in zip(replies, expected, strict=True):
        assert isinstance(reply, InferenceReply)
        np.testing.assert_allclose(reply.probability_array(), probs, rtol=1e-6)
        assert reply.label == int(np.argmax(probs))
        assert reply.bundle_id == manifest.bundle_id and reply.device == "dev1"
    assert inf.batches == 1 and inf.answered == 40


def test_invalid_requests_get_codes_and_the_rest_are_answered(
        bundle: tuple[Path, Manifest]) -> None:
    path, manifest = bundle
    inf = HpcInference.load(path)
    nan = float("nan")
    batch = [
        request(manifest, 1, [0.5, -1.0, 2.0]),
        request(manifest, 2, [0.5, -1.0, 2.0], bundle_id="not-this-bundle"),
        request(manifest, 3, [0.5, -1.0]),  # wrong feature count
        request(manifest, 4, [0.5, -1.0, 0.0], [True, True, False]),  # HPC needs sensor b
        request(manifest, 5, [0.5, nan, 2.0]),  # built in-process: the codec never saw it
        request(manifest, 6, [1.0, 2.0, 3.0]),
    ]
    replies = inf.handle_batch(batch)
    codes = [r.code if isinstance(r, ErrorReply) else "ok" for r in replies]
    assert codes == ["ok", E.UNKNOWN_BUNDLE, E.BAD_FEATURES, E.MISSING_FEATURES, E.NON_FINITE, "ok"]
    assert [r.request_id for r in replies] == [1, 2, 3, 4, 5, 6]
    assert inf.error_counts == {E.UNKNOWN_BUNDLE: 1, E.BAD_FEATURES: 1, E.MISSING_FEATURES: 1,
                                E.NON_FINITE: 1}
    ok = reference_probabilities(path, manifest, np.array([[0.5, -1.0, 2.0], [1.0, 2.0, 3.0]]))
    np.testing.assert_allclose(replies[0].probability_array(), ok[0], rtol=1e-6)  # type: ignore[union-attr]
    np.testing.assert_allclose(replies[5].probability_array(), ok[1], rtol=1e-6)  # type: ignore[union-attr]


def test_unmeasured_slots_are_zeroed_even_if_the_device_sent_garbage(
        bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    # A bundle whose HPC needs only sensor a: feature 2 (sensor b) may be unmeasured.
    path, manifest = bundle
    inf = HpcInference.load(path)
    inf.hpc_features = np.asarray([0, 1], dtype=np.intp)
    feats = np.array([0.25, 0.75, np.inf], dtype="<f4").tobytes()
    mask = np.packbits([True, True, False], bitorder="little").tobytes()
    req = InferenceRequest(9, "dev1", manifest.bundle_id, 0.0, 100.0, feats, mask)
    (reply,) = inf.handle_batch([req])
    expected = reference_probabilities(path, manifest, np.array([[0.25, 0.75, 0.0]]))
    assert isinstance(reply, InferenceReply)
    np.testing.assert_allclose(reply.probability_array(), expected[0], rtol=1e-6)


def test_handle_payload_routes_replies_and_errors(bundle: tuple[Path, Manifest]) -> None:
    path, manifest = bundle
    inf = HpcInference.load(path)
    topic, payload = inf.handle_payload(TOPIC, encode(request(manifest, 7, [1, 2, 3]))) or ("", b"")
    assert topic == "adaptedge/v1/dev1/resp"
    reply = decode(payload)
    assert isinstance(reply, InferenceReply) and reply.request_id == 7

    good = encode(request(manifest, 8, [1, 2, 3]))
    cases: list[tuple[bytes, str, int | None]] = [
        (b"\xc1garbage", E.DECODE_FAILED, None),
        (b"\x00" * (2 << 20), E.TOO_LARGE, None),
        (other_version(good), E.BAD_SCHEMA_VERSION, 8),
        (encode(Telemetry("dev1", 0.0, {})), E.BAD_TYPE, None),
        (encode(request(manifest, 9, [1, 2, 3], device="dev2")), E.BAD_TOPIC, 9),
    ]
    for raw, code, rid in cases:
        out = inf.handle_payload(TOPIC, raw)
        assert out is not None and out[0] == "adaptedge/v1/dev1/resp"
        err = decode(out[1])
        assert isinstance(err, ErrorReply), code
        assert (err.code, err.request_id, err.device) == (code, rid, "dev1")
    assert inf.handle_payload("adaptedge/v1/dev1/resp", b"x") is None
    assert inf.handle_payload("other/topic", b"x") is None
    assert inf.error_counts[E.BAD_TOPIC] == 3  # one routed, two without a reply topic


def test_a_non_finite_measured_value_on_the_wire_is_refused(bundle: tuple[Path, Manifest]) -> None:
    path, manifest = bundle
    inf = HpcInference.load(path)
    out = inf.handle_payload(TOPIC, encode(request(manifest, 3, [1.0, float("nan"), 2.0])))
    assert out is not None
    err = decode(out[1])
    assert isinstance(err, ErrorReply) and err.code == E.NON_FINITE


def test_load_refuses_a_tampered_bundle_and_a_model_without_the_contract(
        bundle: tuple[Path, Manifest]) -> None:
    path, manifest = bundle
    hpc = path / manifest.hpc.file
    hpc.write_bytes(hpc.read_bytes() + b"\x00")
    with pytest.raises(ValueError, match="SHA-256"):
        HpcInference.load(path)


def test_load_refuses_an_hpc_onnxruntime_cannot_open(tmp_path: Path) -> None:
    from dataclasses import replace

    from adaptedge.protocol import write_bundle
    manifest = build_toy_bundle(tmp_path / "ok")
    files = {name: (tmp_path / "ok" / name).read_bytes() for name in manifest.files}
    files[manifest.hpc.file] = b"not an onnx model"
    write_bundle(tmp_path / "bad", replace(manifest, files={}), files)
    with pytest.raises(CloudError, match="onnxruntime cannot load"):
        HpcInference.load(tmp_path / "bad")


def test_micro_batch_flush_rules() -> None:
    batch: MicroBatch[int] = MicroBatch(max_batch=3, max_wait_ms=5.0)
    assert batch.time_left(0.0) == float("inf") and not batch.due(0.0)
    assert not batch.add(1, 10.0)
    assert not batch.due(10.004) and batch.due(10.005)
    assert batch.time_left(10.001) == pytest.approx(0.004)
    assert not batch.add(2, 10.002)
    assert batch.add(3, 10.003) and batch.full
    assert batch.take() == [1, 2, 3] and len(batch) == 0
    with pytest.raises(ValueError, match="max_batch"):
        MicroBatch(max_batch=0)


def test_recent_requests_lru() -> None:
    recent = RecentRequests(capacity=2)
    assert recent.seen("d", 1, b"x") is None
    assert recent.seen("d", 1, b"x") is PENDING
    recent.answered("d", 1, b"x", b"reply-1")
    assert recent.seen("d", 1, b"x") == b"reply-1"
    assert recent.seen("e", 1, b"x") is None  # another device, same id: a new request
    assert recent.seen("d", 2, b"x") is None  # evicts the least recently used: ("d", 1)
    assert len(recent) == 2 and recent.seen("e", 1, b"x") is PENDING
    assert recent.seen("d", 1, b"x") is None


def test_the_single_row_path_matches_the_batch_path(bundle: tuple[Path, Manifest]) -> None:
    path, manifest = bundle
    inf = HpcInference.load(path)
    assert inf._bound_row.available  # the latency path is in use for this model
    x = np.random.default_rng(5).normal(size=(25, 3)).astype(np.float32)
    requests = [request(manifest, i, row.tolist()) for i, row in enumerate(x)]
    together = inf.handle_batch(requests)
    alone = [inf.handle_batch([req])[0] for req in requests]
    for a, b in zip(together, alone, strict=True):
        assert isinstance(a, InferenceReply) and isinstance(b, InferenceReply)
        assert (a.label, a.probabilities, a.request_id) == (b.label, b.probabilities, b.request_id)
    (nan_reply,) = inf.handle_batch([request(manifest, 99, [1.0, float("nan"), 0.0])])
    assert isinstance(nan_reply, ErrorReply) and nan_reply.code == E.NON_FINITE
    tie = np.zeros(4, dtype="<f4").tobytes()
    assert first_argmax(tie) == 0
    assert first_argmax(np.array([0.1, 0.4, 0.4, 0.1], dtype="<f4").tobytes()) == 1
