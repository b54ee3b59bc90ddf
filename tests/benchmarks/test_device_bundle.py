"""``benchmarks.device_bundle`` on the toy bundle: the records it prints are the bundles' own."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.protocol import Manifest
from adaptedge.protocol.device_bundle import device_bundle_id
from benchmarks.device_bundle import main


def test_the_records_name_each_bundle_and_its_bytes(toy_bundle: tuple[Path, Manifest],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path, manifest = toy_bundle
    result = main(["--bundle", str(path), "--loads", "2", "--xz"])
    full, every, one = result["results"]
    assert (full["bundle_id"], every["bundle_id"], one["bundle_id"]) == (
        manifest.bundle_id, device_bundle_id(manifest),
        device_bundle_id(manifest, [manifest.default_operating_point]))
    held = sum(p.stat().st_size for p in path.iterdir())
    hpc = (path / "hpc.onnx").stat().st_size
    assert full["bytes"] == held and every["bytes"] < held - hpc + 1024  # a new manifest
    graph = manifest.policies[manifest.operating_point(manifest.default_operating_point).policy]
    models = {n.model.file for n in graph.nodes.values()}
    assert one["points"] == 1 and one["files"] == len(models) + 1  # and the manifest
    assert one["bytes"] < every["bytes"]
    assert full["image_xz_bytes"] is None and 0 < one["image_xz_bytes"] < one["image_bytes"]
    assert all(len(r["load_ms"]) == 2 for r in result["results"])
    assert result["c_export"]["default_point"] == manifest.default_operating_point
    assert '"benchmark": "device_bundle"' in capsys.readouterr().out
