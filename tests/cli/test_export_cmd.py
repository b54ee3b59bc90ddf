"""``adaptedge export c``: writes the library for a point; refuses an unknown point in one
line (exit status 2). ``adaptedge export device``: the chosen points, signed on request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaptedge.cli.main import main
from adaptedge.protocol import Manifest, verify
from adaptedge.protocol.device_bundle import write_device_bundle


def test_export_c_writes_the_library(toy_bundle: tuple[Path, Manifest], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    path, manifest = toy_bundle
    point = manifest.operating_points[-1].name
    assert main(["export", "c", "--bundle", str(path), "--point", point, "--out",
                 str(tmp_path / "c")]) == 0
    header = (tmp_path / "c" / "adaptedge_policy.h").read_text()
    assert "int adaptedge_decide(" in header
    assert f"#define ADAPTEDGE_N_SENSORS {len(manifest.sensors)}" in header
    assert repr(point) in capsys.readouterr().out


def test_unknown_point_is_refused_in_one_line(toy_bundle: tuple[Path, Manifest], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = toy_bundle
    assert main(["export", "c", "--bundle", str(path), "--point", "nope", "--out",
                 str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no operating point 'nope'" in err and "\n" not in err
    assert not (tmp_path / "c").exists()


def test_export_device_keeps_the_chosen_points_and_signs(
        toy_bundle: tuple[Path, Manifest], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path, manifest = toy_bundle
    assert main(["keys", "new", "--out", str(tmp_path / "keys")]) == 0
    assert main(["export", "device", "--bundle", str(path), "--points", "gate", "--out",
                 str(tmp_path / "dev"), "--key", str(tmp_path / "keys" / "signing.key")]) == 0
    device = verify(tmp_path / "dev", trust=[tmp_path / "keys" / "signing.pub"])
    assert [p.name for p in device.operating_points] == ["gate"]
    assert device.default_operating_point == "gate"  # "walk", the default, was not kept
    out = capsys.readouterr().out
    assert f"wrote device bundle {device.bundle_id}" in out and "signed with key" in out
    assert f"HPC {manifest.bundle_id}/hpc.onnx" in out


def test_export_device_refuses_an_unknown_point_in_one_line(
        toy_bundle: tuple[Path, Manifest], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = toy_bundle
    assert main(["export", "device", "--bundle", str(path), "--points", "walk,nope", "--out",
                 str(tmp_path / "dev")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no operating point 'nope'" in err and "\n" not in err
    assert not (tmp_path / "dev").exists()


def test_export_c_of_a_device_bundle_is_the_full_bundles(
        toy_bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    path, manifest = toy_bundle
    device = write_device_bundle(path, manifest, tmp_path / "dev", ["walk"])
    for bundle, out in ((path, "c-full"), (tmp_path / "dev", "c-dev")):
        assert main(["export", "c", "--bundle", str(bundle), "--point", "walk", "--out",
                     str(tmp_path / out)]) == 0
    full_c = (tmp_path / "c-full" / "adaptedge_policy.c").read_text()
    dev_c = (tmp_path / "c-dev" / "adaptedge_policy.c").read_text()
    assert dev_c == full_c.replace(manifest.bundle_id, device.bundle_id)


def test_export_c_refuses_size_dependent_costs_in_one_line(
        toy_bundle: tuple[Path, Manifest], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from adaptedge.protocol.bundle import read_manifest_body
    from adaptedge.protocol.bundle_digest import MANIFEST_NAME, manifest_digest

    path, _ = toy_bundle
    body = read_manifest_body(path)
    body["sensors"][1]["size_poly"] = {"energy_mj": [1.0, 0.5]}  # sensor "b"
    body["bundle_id"] = manifest_digest(body)
    (path / MANIFEST_NAME).write_text(json.dumps(body))
    assert main(["export", "c", "--bundle", str(path), "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "sensor 'b' costs more for a bigger item (size_poly)" in err
    assert "C exporter cannot express" in err and not (tmp_path / "c").exists()
