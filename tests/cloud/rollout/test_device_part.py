"""Over the air only the device part travels: the HPC stays in the cloud."""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.rollout.announce import (
    ChunkServer,
    announce,
    announcement,
    build_image,
    start_threaded,
)
from adaptedge.cloud.transport.connection import make_client, parse_broker_url
from adaptedge.protocol.bundle import verify
from adaptedge.protocol.bundle_signing import sign_bundle
from adaptedge.protocol.device_bundle import device_bundle_id, write_device_bundle
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.ota_fleet import new_keys, rewrite_file, start_device, versioned_bundle

HPC_BYTES = 2 << 20


def _full_with_big_hpc(out: Path, version: int, seed: int) -> str:
    """A toy v``version`` full bundle whose HPC file is 2 MB (unsigned); returns its id."""
    versioned_bundle(out, version, None, seed=seed)
    return rewrite_file(out, "hpc.onnx", np.random.default_rng(seed).bytes(HPC_BYTES))


def _members(image: Path) -> list[str]:
    with tarfile.open(image) as tar:
        return [Path(m.name).name for m in tar.getmembers() if m.isfile()]


def test_an_unsigned_full_bundle_ships_as_its_device_part(tmp_path: Path) -> None:
    _full_with_big_hpc(tmp_path / "v2", 2, seed=2)
    full = verify(tmp_path / "v2")
    image = build_image(tmp_path / "v2", tmp_path / "images", device_only=True)
    assert image.bundle_id == device_bundle_id(full) and image.version == 2
    assert "hpc.onnx" not in _members(image.path) and image.size < HPC_BYTES // 20
    whole = build_image(tmp_path / "v2", tmp_path / "images-full")  # as given: all of it
    assert whole.bundle_id == full.bundle_id and whole.size > HPC_BYTES


def test_a_signed_full_bundle_is_not_shipped_as_an_unsigned_part(tmp_path: Path) -> None:
    keys = new_keys(tmp_path / "keys")
    versioned_bundle(tmp_path / "v2", 2, keys, seed=2)
    with pytest.raises(CloudError, match=r"is a signed full bundle.*adaptedge export device"):
        build_image(tmp_path / "v2", tmp_path / "images", device_only=True)


@pytest.mark.broker
@pytest.mark.parametrize("xz", [False, True])
def test_the_bytes_sent_over_the_air_are_the_device_bundle_not_the_hpc(
        mosquitto: MosquittoBroker, tmp_path: Path, xz: bool) -> None:
    keys = new_keys(tmp_path / "keys")
    versioned_bundle(tmp_path / "v1", 1, keys, seed=1)
    _full_with_big_hpc(tmp_path / "v2", 2, seed=2)
    device = write_device_bundle(tmp_path / "v2", verify(tmp_path / "v2"), tmp_path / "d2")
    sign_bundle(tmp_path / "d2", keys.private)
    image = build_image(tmp_path / "d2", tmp_path / "images", chunk_size=4096, xz=xz)
    with ChunkServer(mosquitto.url) as server:
        server.add(image)
        dev = start_device("dev1", tmp_path / "v1", mosquitto.url, keys, tmp_path / "updates",
                           version=1, retry_s=5.0)
        try:
            admin = make_client("admin")
            start_threaded(admin, parse_broker_url(mosquitto.url))
            announce(admin, ["dev1"], announcement(image, rollout="dev", probation_decisions=0,
                                                   min_decisions=0))
            admin.disconnect()
            admin.loop_stop()
            assert dev.wait_state("active", device.bundle_id, 60.0), dev.follower.statuses[-1]
        finally:
            dev.close()
    tar = (tmp_path / "images" / f"{device.bundle_id}.tar").stat().st_size
    data = image.path.read_bytes()
    chunks = [data[i:i + 4096] for i in range(0, len(data), 4096)]
    # each chunk once, but those of zeros only (the tar's end), which a device's empty part
    # file already holds (ota_download resumes them)
    files = list((tmp_path / "d2").iterdir())  # the tar: the files, a header and padding
    size = sum(p.stat().st_size for p in files)  # each, the top folder, end and record padding
    assert len(data) == image.size and size < tar <= size + 1024 * len(files) + 11264
    assert image.size < tar / 2 if xz else image.size == tar  # xz: the tar compressed
    assert server.counters["bytes_sent"] == sum(len(c) for c in chunks if c.strip(b"\0"))
    assert image.size < HPC_BYTES // 20  # the 2 MB HPC did not travel
    kept = tmp_path / "updates" / "dev1" / "bundles" / device.bundle_id
    assert verify(kept).bundle_id == device.bundle_id and not (kept / "hpc.onnx").exists()
