"""Bundles: manifest validation names the field; verify refuses any tampering, naming the file."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from adaptedge.protocol import BundleError, Manifest, open_bundle, read_manifest, verify
from adaptedge.protocol.bundle_digest import MANIFEST_NAME, manifest_digest


def _raw(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / MANIFEST_NAME).read_text())  # type: ignore[no-any-return]


def _rewrite(bundle: Path, raw: dict[str, Any], *, rehash: bool = True) -> None:
    if rehash:
        raw["bundle_id"] = manifest_digest(raw)
    (bundle / MANIFEST_NAME).write_text(json.dumps(raw))


def test_verify_accepts_a_fresh_bundle(toy_bundle: tuple[Path, Manifest]) -> None:
    path, written = toy_bundle
    assert verify(path) == written
    assert Manifest.from_dict(written.to_dict()) == written


@pytest.mark.parametrize("how", ["flip", "append", "truncate"])
def test_changed_byte_is_refused_naming_the_file(toy_bundle: tuple[Path, Manifest], how: str) -> None:
    path, _ = toy_bundle
    target = path / "a.onnx"
    data = bytearray(target.read_bytes())
    if how == "flip":
        data[len(data) // 2] ^= 0x01
    elif how == "append":
        data += b"\0"
    else:
        data = data[:-1]
    target.write_bytes(bytes(data))
    with pytest.raises(BundleError) as info:
        verify(path)
    assert "a.onnx" in str(info.value)


def test_missing_file_is_refused(toy_bundle: tuple[Path, Manifest]) -> None:
    path, _ = toy_bundle
    (path / "hpc.onnx").unlink()
    with pytest.raises(BundleError, match=r"hpc\.onnx.*missing"):
        verify(path)


def test_extra_file_is_refused(toy_bundle: tuple[Path, Manifest]) -> None:
    path, _ = toy_bundle
    (path / "evil.onnx").write_bytes(b"x")
    with pytest.raises(BundleError, match=r"evil\.onnx.*not listed"):
        verify(path)


def test_edited_manifest_is_refused(toy_bundle: tuple[Path, Manifest]) -> None:
    path, _ = toy_bundle
    raw = _raw(path)
    raw["sensors"][0]["energy_mj"] = 0.0
    _rewrite(path, raw, rehash=False)
    with pytest.raises(BundleError, match="edited after export"):
        verify(path)


def test_unknown_sensor_in_graph_names_the_field(toy_bundle: tuple[Path, Manifest]) -> None:
    path, _ = toy_bundle
    raw = _raw(path)
    raw["policies"]["walk"]["nodes"]["a"]["actions"][1]["sensor"] = "gyro"
    _rewrite(path, raw)
    with pytest.raises(BundleError) as info:
        read_manifest(path)
    assert info.value.path == "policies.walk.nodes.a.actions[1].sensor"
    assert "gyro" in str(info.value)


def test_wrong_schema_version_is_refused(toy_bundle: tuple[Path, Manifest]) -> None:
    path, _ = toy_bundle
    raw = _raw(path)
    raw["schema_version"] = 99
    _rewrite(path, raw)
    with pytest.raises(BundleError, match="99 is not supported") as info:
        read_manifest(path)
    assert info.value.path == "schema_version"


MANIFEST_EDITS = [
    ("classes", lambda r: r.__setitem__("classes", ["only"]), "classes"),
    ("bad-feature-index", lambda r: r["sensors"][0].__setitem__("features", [0, 99]), "sensors[0].features"),
    ("negative-energy", lambda r: r["sensors"][1].__setitem__("energy_mj", -1), "sensors[1].energy_mj"),
    ("shared-feature", lambda r: r["sensors"][1].__setitem__("features", [1]), "sensors"),
    ("missing-link", lambda r: r.pop("link"), "link"),
    ("unlisted-model", lambda r: r["policies"]["gate"]["nodes"]["ab"]["model"].__setitem__("file", "x.onnx"),
     "policies.gate.nodes.ab.model.file"),
    ("input-of-unread-sensor", lambda r: r["policies"]["walk"]["nodes"]["a"]["model"].__setitem__("inputs", [2]),
     "policies.walk.nodes.a.model.inputs"),
    ("edge-to-wrong-set", lambda r: r["policies"]["walk"]["nodes"]["root"]["actions"][0].__setitem__("next", "ab"),
     "policies.walk.nodes.root.actions[0].next"),
    ("bad-root", lambda r: r["policies"]["walk"].__setitem__("root", "nope"), "policies.walk.root"),
    ("bad-action", lambda r: r["policies"]["gate"]["nodes"]["ab"]["actions"].append({"kind": "jump"}),
     "policies.gate.nodes.ab.actions[2].kind"),
    ("bad-default", lambda r: r.__setitem__("default_operating_point", "x"), "default_operating_point"),
    ("point-policy", lambda r: r["operating_points"][0].__setitem__("policy", "x"), "operating_points[0].policy"),
    ("bad-digest", lambda r: r["files"].__setitem__("a.onnx", "XYZ"), "files.a.onnx"),
    ("path-traversal", lambda r: r["files"].__setitem__("../x", "0" * 64), "files.../x"),
    ("hpc-sensor", lambda r: r["hpc"].__setitem__("sensors", ["a", "zz"]), "hpc.sensors"),
]


@pytest.mark.parametrize(("name", "edit", "field"), MANIFEST_EDITS, ids=[m[0] for m in MANIFEST_EDITS])
def test_invalid_manifests_name_the_field(toy_bundle: tuple[Path, Manifest], name: str, edit: Any,
                                          field: str) -> None:
    raw = _raw(toy_bundle[0])
    edit(raw)
    with pytest.raises(BundleError) as info:
        Manifest.from_dict(raw)
    assert info.value.path == field


def test_not_json_and_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="not a bundle"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text("{nope")
    with pytest.raises(BundleError, match="not valid JSON"):
        read_manifest(tmp_path)


def test_tar_bundles_open(toy_bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    path, written = toy_bundle
    archive = tmp_path / "toy.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(path, arcname="toy")
    with open_bundle(archive) as root:
        assert verify(root).bundle_id == written.bundle_id


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "adaptedge.cli.main", *args], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.slow
def test_inspect_prints_the_manifest(toy_bundle: tuple[Path, Manifest]) -> None:
    path, written = toy_bundle
    out = _cli("inspect", str(path))
    assert out.returncode == 0, out.stderr
    for text in (written.bundle_id, "walk *", "energy mJ", "hpc.onnx", written.files["a.onnx"]):
        assert text in out.stdout
    as_json = json.loads(_cli("inspect", "--json", str(path)).stdout)
    assert as_json["bundle_id"] == written.bundle_id


def test_inspect_refuses_a_tampered_bundle_in_one_line(toy_bundle: tuple[Path, Manifest]) -> None:
    path, _ = toy_bundle
    with (path / "ab.onnx").open("ab") as fh:
        fh.write(b"!")
    out = _cli("inspect", str(path))
    assert out.returncode != 0
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "ab.onnx" in lines[0]
