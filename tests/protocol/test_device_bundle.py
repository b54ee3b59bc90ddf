"""Device bundles: cut from a full bundle, the HPC named by hash, points chosen, id predictable."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from adaptedge.protocol.bundle import read_manifest_body, verify
from adaptedge.protocol.bundle_digest import MANIFEST_NAME, manifest_digest, sha256_file
from adaptedge.protocol.device_bundle import (
    check_answers_for,
    device_bundle_id,
    device_manifest,
    write_device_bundle,
)
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import Manifest
from tests.support.toy_bundle import build_toy_bundle


def test_the_all_points_device_bundle_leaves_the_hpc_out_and_names_it(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    device = write_device_bundle(tmp_path / "full", full, tmp_path / "dev")
    assert verify(tmp_path / "dev") == device
    assert not (tmp_path / "dev" / "hpc.onnx").exists() and not device.carries_hpc
    assert set(device.files) == set(full.files) - {"hpc.onnx"}
    assert device.hpc.sha256 == sha256_file(tmp_path / "full" / "hpc.onnx") == full.hpc_sha256
    assert device.hpc.cloud_bundle == full.bundle_id and device.hpc_sha256 == full.hpc_sha256
    assert [p.name for p in device.operating_points] == ["gate", "walk"]
    assert device.default_operating_point == full.default_operating_point
    assert device.bundle_id == device_bundle_id(full) != full.bundle_id  # known without files
    check_answers_for(full, device)


def test_drift_references_are_kept_for_the_kept_points_only() -> None:
    raw = json.loads((Path(__file__).parent / "data" / "classification_manifest.json")
                     .read_text())
    full = Manifest.from_dict(raw)
    refs = {"gate": {"escalation_rate": 0.5}, "walk": {"escalation_rate": 0.25}}
    full = replace(full, metadata={**full.metadata, "drift_reference": refs, "other": [1]})
    one = device_manifest(full, ["gate"])
    assert one.metadata["drift_reference"] == {"gate": refs["gate"]}
    assert one.metadata["other"] == [1]
    assert device_manifest(full).metadata["drift_reference"] == refs


def test_old_full_bundles_read_and_hash_as_before(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    body = read_manifest_body(tmp_path / "full")
    assert set(body["hpc"]) == {"file", "sensors", "accuracy", "description"}
    assert manifest_digest(body) == full.bundle_id == verify(tmp_path / "full").bundle_id
    assert full.carries_hpc and full.hpc.sha256 is None


@pytest.mark.parametrize(("points", "default", "files"), [
    (["gate"], "gate", {"gate.onnx"}),  # the full bundle's default ("walk") is not kept
    (["gate", "walk"], "walk", {"gate.onnx", "root.onnx", "a.onnx", "ab.onnx"}),
    (["walk", "gate", "walk"], "walk", {"gate.onnx", "root.onnx", "a.onnx", "ab.onnx"}),
])
def test_chosen_points_keep_only_their_policies_and_files(
        tmp_path: Path, points: list[str], default: str, files: set[str]) -> None:
    full = build_toy_bundle(tmp_path / "full")
    device = write_device_bundle(tmp_path / "full", full, tmp_path / "dev", points)
    assert device.default_operating_point == default
    assert set(device.files) == files
    assert {p.name for p in device.operating_points} == set(points)
    assert sorted(p.name for p in (tmp_path / "dev").iterdir()) == sorted(
        [*files, MANIFEST_NAME])
    assert device.bundle_id == device_bundle_id(full, points)


def test_a_device_bundle_cut_again_keeps_naming_the_same_hpc(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    device = write_device_bundle(tmp_path / "full", full, tmp_path / "dev")
    again = write_device_bundle(tmp_path / "dev", device, tmp_path / "dev1", ["walk"])
    assert again.hpc == device.hpc
    check_answers_for(full, again)


def test_an_unknown_point_is_refused_naming_it(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    with pytest.raises(BundleError, match=r"no operating point 'fast'.*gate, walk"):
        write_device_bundle(tmp_path / "full", full, tmp_path / "dev", ["walk", "fast"])
    assert not (tmp_path / "dev").exists()
    with pytest.raises(BundleError, match="no operating point chosen: name at least one"):
        write_device_bundle(tmp_path / "full", full, tmp_path / "dev", [])


def test_another_hpc_or_layout_is_refused_in_one_line(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    other = build_toy_bundle(tmp_path / "other", seed=1)  # other weights: another HPC file
    device = write_device_bundle(tmp_path / "other", other, tmp_path / "dev")
    with pytest.raises(BundleError) as caught:
        check_answers_for(full, device)
    text = str(caught.value)
    assert "\n" not in text and f"{other.bundle_id}/hpc.onnx" in text
    assert f"{full.bundle_id}/hpc.onnx" in text and "serve the cloud bundle" in text
    renamed = replace(device, classes=("no", "yes"), hpc=replace(device.hpc,
                                                                 sha256=full.hpc_sha256))
    with pytest.raises(BundleError, match="other classes"):
        check_answers_for(full, renamed)


def _edit_hpc(bundle: Path, **hpc: object) -> dict[str, object]:
    body = read_manifest_body(bundle)
    body["hpc"].update(hpc)
    body["hpc"] = {k: v for k, v in body["hpc"].items() if v is not None}
    body["bundle_id"] = manifest_digest(body)
    (bundle / MANIFEST_NAME).write_text(json.dumps(body))
    return body


@pytest.mark.parametrize(("edit", "message"), [
    ({"cloud_bundle": None}, "hpc.cloud_bundle: a device bundle names its HPC by both"),
    ({"sha256": None}, "hpc.sha256: a device bundle names its HPC by both"),
    ({"sha256": "ABC"}, "hpc.sha256: must be a lower-case SHA-256"),
])
def test_a_device_bundle_must_name_its_hpc_fully(tmp_path: Path, edit: dict[str, object],
                                                 message: str) -> None:
    full = build_toy_bundle(tmp_path / "full")
    write_device_bundle(tmp_path / "full", full, tmp_path / "dev")
    body = _edit_hpc(tmp_path / "dev", **edit)
    with pytest.raises(BundleError, match=message):
        Manifest.from_dict(body)


def test_a_bundle_cannot_both_hold_and_name_its_hpc(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    body = _edit_hpc(tmp_path / "full", sha256=full.hpc_sha256, cloud_bundle=full.bundle_id)
    with pytest.raises(BundleError, match=r"hpc.file: names file 'hpc.onnx' by hash, so the "
                       r"bundle must not hold it"):
        Manifest.from_dict(body)
