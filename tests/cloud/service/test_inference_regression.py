"""HpcInference on a regression bundle (issue #33): the HPC's ``value`` answers as a
``ValueReply`` on both the bound single-row path and the batch path; a non-finite value is an
``internal`` error reply, never an answer; an HPC without a ``value`` output is refused."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cloud import CloudError, HpcInference
from adaptedge.protocol import (
    ErrorReply,
    InferenceRequest,
    Manifest,
    ValueReply,
    decode,
    encode,
    pack_features,
)
from adaptedge.protocol import errors as E
from tests.support.toy_regression_bundle import (
    VALUE_WEIGHTS,
    build_toy_regression_bundle,
    hpc_value,
    linear_value_model,
)

TOPIC = "adaptedge/v1/dev1/req"


def request(manifest: Manifest, rid: int, values: list[float],
            measured: list[bool] | None = None) -> InferenceRequest:
    feats, mask = pack_features(values, [True] * len(values) if measured is None else measured)
    return InferenceRequest(rid, "dev1", manifest.bundle_id, time.time(), 250.0, feats, mask)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    out = tmp_path_factory.mktemp("regcloud") / "b"
    return out, build_toy_regression_bundle(out)


def test_single_row_answers_the_hpc_value(bundle: tuple[Path, Manifest]) -> None:
    path, manifest = bundle
    hpc = HpcInference.load(path)
    assert hpc.regression and hpc.output == "value"
    row = [0.5, -1.25, 2.0]
    routed = hpc.handle_payload(TOPIC, encode(request(manifest, 7, row)))
    assert routed is not None and routed[0] == "adaptedge/v1/dev1/resp"
    reply = decode(routed[1])
    assert isinstance(reply, ValueReply) and reply.request_id == 7
    assert reply.value == hpc_value(row) and reply.bundle_id == manifest.bundle_id
    answered = hpc.answer_one(request(manifest, 8, row))
    assert isinstance(answered, ValueReply) and answered.value == hpc_value(row)


def test_batch_matches_row_by_row(bundle: tuple[Path, Manifest]) -> None:
    path, manifest = bundle
    hpc = HpcInference.load(path)
    X = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    replies = hpc.handle_batch([request(manifest, i, row.tolist()) for i, row in enumerate(X)])
    for i, reply in enumerate(replies):
        assert isinstance(reply, ValueReply) and reply.request_id == i
        assert reply.value == pytest.approx(hpc_value(X[i]), rel=1e-6, abs=1e-6)
        assert np.float32(reply.value) == reply.value  # a float32 on the wire
    # a partly measured request the HPC can answer (unmeasured slots are 0): same as zeros
    missing = hpc.handle_batch([request(manifest, 99, [1.0, 2.0, 3.0], [True, True, True]),
                                request(manifest, 98, [1.0, 2.0, 3.0], [True, False, True])])
    assert isinstance(missing[0], ValueReply)
    assert isinstance(missing[1], ErrorReply) and missing[1].code == E.MISSING_FEATURES


def test_non_finite_hpc_value_is_an_error_reply(tmp_path: Path) -> None:
    """value = sqrt(x w + c): NaN where x w + c < 0; those rows get ``internal``, the rest
    their value, on both paths."""
    w, c = VALUE_WEIGHTS["hpc.onnx"]
    manifest = build_toy_regression_bundle(
        tmp_path / "b", hpc=linear_value_model(w, c, unary="Sqrt"))
    hpc = HpcInference.load(tmp_path / "b")
    good, bad = [1.0, 1.0, 1.0], [-5.0, 0.0, 0.0]
    lone = hpc.handle_batch([request(manifest, 1, bad)])[0]
    assert isinstance(lone, ErrorReply) and lone.code == E.INTERNAL
    assert "non-finite" in lone.message
    replies = hpc.handle_batch([request(manifest, 2, good), request(manifest, 3, bad),
                                request(manifest, 4, good)])
    assert [type(r) for r in replies] == [ValueReply, ErrorReply, ValueReply]
    assert replies[0].value == pytest.approx(math.sqrt(hpc_value(good)), rel=1e-6)  # type: ignore[union-attr]
    assert hpc.error_counts[E.INTERNAL] == 2


def test_hpc_without_value_output_refused(tmp_path: Path) -> None:
    w, c = VALUE_WEIGHTS["hpc.onnx"]
    build_toy_regression_bundle(tmp_path / "b",
                                hpc=linear_value_model(w, c, output="probabilities"))
    with pytest.raises(CloudError, match="give output 'value'"):
        HpcInference.load(tmp_path / "b")
