"""Issue 15 item 11: a hostile HPC model can neither hang the worker (a huge Loop) nor balloon
its memory (ConstantOfShape); the request that triggers it is answered ``internal``."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cloud import CloudError, CloudService, HpcInference
from adaptedge.protocol import ErrorReply, InferenceReply
from adaptedge.protocol import errors as E
from adaptedge.simulator.brokers import MosquittoBroker
from tests.attacks.cloud_helpers import (
    balloon_model,
    bundle_with_hpc,
    device,
    loop_model,
    request,
    send,
)

LIMIT_S = 0.5


def test_a_model_that_never_finishes_is_refused_at_load(tmp_path: Path) -> None:
    path, _ = bundle_with_hpc(tmp_path / "loop", tmp_path, loop_model(10**15))
    started = time.monotonic()
    with pytest.raises(CloudError, match="did not answer one row within"):
        HpcInference.load(path, run_limit_s=LIMIT_S)
    assert time.monotonic() - started < 10 * LIMIT_S + 5


@pytest.mark.slow
def test_a_row_that_makes_the_model_loop_gets_internal_and_its_batch_mates_answers(
        tmp_path: Path) -> None:
    path, manifest = bundle_with_hpc(tmp_path / "loop", tmp_path, loop_model(None))
    hpc = HpcInference.load(path, run_limit_s=LIMIT_S)  # the probe row loops once
    batch = [request(manifest, i, [1.0, 2.0, 1e12 if i == 3 else 0.5], f"dev{i}")
             for i in range(6)]
    started = time.monotonic()
    replies = hpc.handle_batch(batch)
    assert time.monotonic() - started < 10 * LIMIT_S + 5
    for i, reply in enumerate(replies):
        if i == 3:
            assert isinstance(reply, ErrorReply) and reply.code == E.INTERNAL, reply
        else:
            assert isinstance(reply, InferenceReply), (i, reply)
    lone = hpc.handle_batch([batch[3]])[0]  # the single-row path is bounded as well
    assert isinstance(lone, ErrorReply) and lone.code == E.INTERNAL
    assert hpc.guard.terminated >= 3
    ok = hpc.handle_batch([batch[0]])[0]  # and the session still works afterwards
    assert isinstance(ok, InferenceReply)


def test_a_constant_of_shape_balloon_is_refused_not_allocated(tmp_path: Path) -> None:
    path, manifest = bundle_with_hpc(tmp_path / "balloon", tmp_path, balloon_model())
    hpc = HpcInference.load(path)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reply = hpc.handle_batch([request(manifest, 1, [2e8, 1.0, 1.0])])[0]  # 800 MB asked
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert isinstance(reply, ErrorReply) and reply.code == E.INTERNAL, reply
    assert grown_mib < 300, f"the worker grew by {grown_mib:.0f} MiB"
    small = hpc.handle_batch([request(manifest, 2, [1000.0, 1.0, 1.0])])[0]
    assert isinstance(small, InferenceReply)
    np.testing.assert_array_equal(small.probability_array(), [0.5, 0.5])


@pytest.mark.broker
def test_through_the_broker_the_looping_request_is_answered_and_the_worker_keeps_serving(
        tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    path, manifest = bundle_with_hpc(tmp_path / "loop", tmp_path, loop_model(None))
    svc = CloudService(path, mosquitto.url, client_id="worker-hostile", run_limit_s=LIMIT_S)
    svc.start()
    try:
        dev = device(mosquitto.url)
        send(dev, request(manifest, 1, [1e12, 1.0, 1.0]))
        for i in range(2, 12):
            send(dev, request(manifest, i, [1.0, 1.0, 1.0]))
        assert dev.pump(10 * LIMIT_S + 5, lambda: all(i in dev.replies for i in range(1, 12)))
        first = dev.replies[1][0][1]
        assert isinstance(first, ErrorReply) and first.code == E.INTERNAL
        assert all(isinstance(dev.replies[i][0][1], InferenceReply) for i in range(2, 12))
        dev.close()
    finally:
        svc.stop()


def test_inspect_refuses_a_bundle_whose_hpc_cloud_serve_refuses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 31 item 6: an HPC whose weights live in an external-data file the bundle does not
    hold verified (every listed hash matches) yet ``cloud serve`` refused it. ``inspect`` now
    loads the HPC with the same loader, ``HpcInference.load``."""
    import onnx
    from onnx.external_data_helper import convert_model_to_external_data

    from adaptedge.cli.main import main as cli
    from tests.support.toy_bundle import build_toy_bundle

    source = tmp_path / "src"
    manifest = build_toy_bundle(source)
    model = onnx.load(str(source / manifest.hpc.file))
    convert_model_to_external_data(model, all_tensors_to_one_file=True, location="hpc.data",
                                   size_threshold=0)
    onnx.save_model(model, str(tmp_path / "hpc.onnx"))  # writes hpc.data beside it
    out, _ = bundle_with_hpc(tmp_path / "external", tmp_path,
                             (tmp_path / "hpc.onnx").read_bytes())
    with pytest.raises(CloudError, match="External data"):
        HpcInference.load(out)
    assert cli(["inspect", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "cloud serve would refuse this bundle" in err and "\n" not in err
    assert cli(["inspect", str(source)]) == 0  # a sound bundle still passes
    assert "as cloud serve does" in capsys.readouterr().out
