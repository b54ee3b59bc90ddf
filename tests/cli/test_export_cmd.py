"""``adaptedge export c``: writes the library for a point; refuses an unknown point in one
line (exit status 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.cli.main import main
from adaptedge.protocol import Manifest


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
