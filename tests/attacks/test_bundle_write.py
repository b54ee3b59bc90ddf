"""Issue 15 item 4: writing a bundle never destroys what the target directory held."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from adaptedge.protocol import BundleError, Manifest, verify
from adaptedge.protocol.bundle import write_bundle
from tests.support.toy_bundle import build_toy_bundle


def _working_folder(path: Path) -> None:
    path.mkdir()
    rows = ["a,b,c,label"] + [f"{i % 7},{(i * 3) % 11},{i % 5},{'xy'[i % 2]}" for i in range(120)]
    (path / "data.csv").write_text("\n".join(rows) + "\n")
    (path / "notes.txt").write_text("my notes\n")


def test_a_folder_that_is_not_a_bundle_is_refused_and_kept(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    _working_folder(folder)
    with pytest.raises(BundleError, match="use an empty or new directory, or --force"):
        build_toy_bundle(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["data.csv", "notes.txt"]
    with pytest.raises(BundleError, match="not a bundle"):
        build_toy_bundle(folder, force=True)  # --force replaces bundles only
    assert (folder / "notes.txt").read_text() == "my notes\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_an_empty_folder_is_filled(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    written = build_toy_bundle(folder)
    assert verify(folder) == written


def test_an_existing_bundle_is_replaced_only_with_force(toy_bundle: tuple[Path, Manifest]) -> None:
    path, first = toy_bundle
    with pytest.raises(BundleError, match="--force"):
        build_toy_bundle(path, seed=1)
    assert verify(path) == first
    second = build_toy_bundle(path, seed=1, force=True)
    assert second.bundle_id != first.bundle_id and verify(path) == second
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # nothing left beside it


def test_a_crash_mid_write_leaves_the_old_bundle_intact(toy_bundle: tuple[Path, Manifest],
                                                        tmp_path: Path) -> None:
    path, first = toy_bundle
    files: dict[str, bytes | Path] = {name: (path / name).read_bytes() for name in first.files}
    files["zz.onnx"] = tmp_path / "does-not-exist"  # copying it fails half-way through
    with pytest.raises(FileNotFoundError):
        write_bundle(path, first, files, force=True)
    assert verify(path) == first
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_file_in_the_way_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_text("keep me")
    with pytest.raises(BundleError, match="not a directory"):
        build_toy_bundle(target, force=True)
    assert target.read_text() == "keep me"


@pytest.mark.slow
def test_train_out_dot_keeps_the_working_folder(tmp_path: Path) -> None:
    """The reported accident: ``adaptedge train --out .`` in a folder of data and notes."""
    folder = tmp_path / "work"
    _working_folder(folder)
    out = subprocess.run(
        [sys.executable, "-m", "adaptedge.cli.main", "train", "--data", "data.csv",
         "--target", "label", "--method", "adapt-lin", "--quick", "--no-progress", "--out", "."],
        cwd=folder, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "use an empty or new directory, or --force" in lines[0]
    assert sorted(p.name for p in folder.iterdir()) == ["data.csv", "notes.txt"]


@pytest.mark.slow
def test_train_out_dot_in_an_empty_folder_writes_the_bundle_there(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    _working_folder(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "adaptedge.cli.main", "train", "--data", str(folder / "data.csv"),
         "--target", "label", "--method", "adapt-lin", "--quick", "--no-progress", "--hpc",
         "logistic", "--jobs", "1", "--out", "."], cwd=empty, capture_output=True, text=True, timeout=300,
        env={**os.environ, "ADAPTEDGE_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    assert verify(empty).bundle_id in out.stdout
