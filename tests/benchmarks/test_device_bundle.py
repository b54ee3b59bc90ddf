"""``benchmarks.device_bundle`` on the toy bundle: the records it prints are the bundles' own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.protocol import Manifest, write_bundle
from adaptedge.protocol.device_bundle import device_bundle_id
from adaptedge.trainer.export.models import tree_ensemble_to_onnx
from adaptedge.trainer.export.trees import TreeArrays
from benchmarks.bundle_profile import bytes_profile, load_profile
from benchmarks.device_bundle import main
from tests.support.toy_bundle import build_toy_bundle


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
    assert result["profile"]["bytes"]["model_files"] == len(manifest.files) - 1  # no HPC
    assert result["profile"]["load"]["sessions"] == len(models)
    assert '"benchmark": "device_bundle"' in capsys.readouterr().out


def _tree_model(base: float, threshold: float) -> bytes:
    tree = TreeArrays(np.array([0, -1, 1, -1, -1]), np.array([threshold, 0.0, 0.25, 0.0, 0.0]),
                      np.array([1, -1, 3, -1, -1]), np.array([2, -1, 4, -1, -1]),
                      np.array([[0.0], [-1.0], [0.0], [0.5], [1.0]]))
    data: bytes = tree_ensemble_to_onnx([tree], 3, 1, base_values=[base]).SerializeToString()
    return data


def test_the_profile_counts_tree_cores_attributes_and_the_load_parts(tmp_path: Path) -> None:
    toy = build_toy_bundle(tmp_path / "toy")
    # the default point ("walk") runs root.onnx, a.onnx and ab.onnx; two of its trees share a
    # core (same trees, another base value), gate.onnx's has another threshold
    files: dict[str, bytes | Path] = {f: tmp_path / "toy" / f for f in toy.files}
    files |= {"a.onnx": _tree_model(0.0, 0.5), "ab.onnx": _tree_model(2.0, 0.5),
              "gate.onnx": _tree_model(0.0, 0.75)}
    written = write_bundle(tmp_path / "trees", toy, files)
    profile = bytes_profile(tmp_path / "trees", written)
    assert profile["model_files"] == profile["distinct_model_files"] == 4  # no HPC
    assert profile["distinct_tree_cores"] == 2
    default = profile["default_point"]
    assert default["files"] == 3 and (default["trees"], default["nodes"]) == (2, 10)
    assert (default["leaves"], default["splits"]) == (6, 4)
    assert default["bytes"] == sum((tmp_path / "trees" / f).stat().st_size
                                   for f in ("root.onnx", "a.onnx", "ab.onnx"))
    assert "nodes_modes" in default["attribute_bytes"]
    assert "nodes_missing_value_tracks_true" not in default["attribute_bytes"]
    load = load_profile(tmp_path / "toy", 2)  # models that follow the node contract
    assert load["sessions"] == 3 and load["verify_ms_median"] > 0 < load["sessions_ms_median"]
