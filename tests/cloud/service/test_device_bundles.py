"""The cloud answers device bundles with the HPC of the full bundle they were cut from, and
refuses, in one line, a device bundle naming an HPC it does not hold (in-process, no broker)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.cloud import CloudError, HpcInference
from adaptedge.cloud.service.bundle_pool import BundlePool
from adaptedge.protocol import InferenceReply
from adaptedge.protocol import errors as E
from adaptedge.protocol.device_bundle import device_bundle_id, write_device_bundle
from adaptedge.protocol.errors import BundleError
from tests.cloud.service.test_inference import reference_probabilities, request
from tests.support.toy_bundle import build_toy_bundle

ROW = [0.3, -1.2, 2.0]


def test_a_full_bundle_answers_its_device_bundles_under_their_own_ids(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    all_points = write_device_bundle(tmp_path / "full", full, tmp_path / "dev")
    one = write_device_bundle(tmp_path / "full", full, tmp_path / "dev1", ["gate"])
    pool = BundlePool([tmp_path / "full", tmp_path / "dev1"])
    try:
        assert set(pool.bundle_ids) == {full.bundle_id, all_points.bundle_id, one.bundle_id}
        replies = pool.handle_batch([request(full, 1, ROW, bundle_id=b.bundle_id)
                                     for b in (full, all_points, one)])
        want = reference_probabilities(tmp_path / "full", full, np.array([ROW]))[0]
        for reply, asked in zip(replies, (full, all_points, one), strict=True):
            assert isinstance(reply, InferenceReply), reply
            assert reply.bundle_id == asked.bundle_id  # the device's own id comes back
            assert reply.model_id == f"{full.bundle_id}/hpc.onnx"
            np.testing.assert_allclose(np.frombuffer(reply.probabilities, np.float32), want,
                                       rtol=1e-6)
        assert pool.loads == 1  # one HPC behind the three ids
        for b in (full, all_points, one):  # what drift monitoring compares each device with
            assert pool.manifest_of(b.bundle_id) == b
        assert pool.manifest_of("nope") is None
    finally:
        pool.close()


def test_a_lone_full_bundle_answers_its_all_points_device_bundle(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    inference = HpcInference.load(tmp_path / "full")
    try:
        assert inference.bundle_ids == (full.bundle_id, device_bundle_id(full))
        reply = inference.handle_batch([request(full, 7, ROW,
                                                bundle_id=device_bundle_id(full))])[0]
        assert isinstance(reply, InferenceReply) and reply.bundle_id == device_bundle_id(full)
        assert inference.manifest_of(full.bundle_id) == full
        every = inference.manifest_of(device_bundle_id(full))
        assert every is not None and every.operating_points == full.operating_points
        one = device_bundle_id(full, ["gate"])  # not given: not answered
        refused = inference.handle_batch([request(full, 8, ROW, bundle_id=one)])[0]
        assert getattr(refused, "code", None) == E.UNKNOWN_BUNDLE
    finally:
        inference.guard.close()


def test_a_device_bundle_naming_another_hpc_is_refused_in_one_line(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    other = build_toy_bundle(tmp_path / "other", seed=1)
    write_device_bundle(tmp_path / "other", other, tmp_path / "dev")
    with pytest.raises(BundleError) as caught:
        BundlePool([tmp_path / "full", tmp_path / "dev"])
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"{tmp_path / 'dev'}: names the cloud model "
                                                f"{other.bundle_id}/hpc.onnx")
    assert f"the HPC served is {full.bundle_id}/hpc.onnx" in text


def test_a_device_bundle_alone_is_refused(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    write_device_bundle(tmp_path / "full", full, tmp_path / "dev")
    with pytest.raises(CloudError, match="is a device bundle: it names its HPC"):
        HpcInference.load(tmp_path / "dev")
    with pytest.raises(CloudError, match="only device bundles given"):
        BundlePool([tmp_path / "dev"])
