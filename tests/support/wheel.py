"""The wheel as users get it: the repository copied (links kept) and built with pip, unpacked."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOP_LEVEL_SKIP = {".venv", ".git", "build", "dist", "benchmarks", "tests"}


@dataclass(frozen=True)
class BuiltWheel:
    names: list[str]
    """Every path in the wheel."""
    site: Path
    """Where it is unpacked (put it on ``PYTHONPATH``)."""


def _ignore(folder: str, names: list[str]) -> set[str]:
    skip = {n for n in names if n == "__pycache__" or n.endswith(("_cache", ".egg-info"))}
    return skip | (TOP_LEVEL_SKIP & set(names) if Path(folder) == REPO else set())


def build_wheel(workdir: Path) -> BuiltWheel:
    """Build the wheel from a copy of the repository under ``workdir`` and unpack it there."""
    source = workdir / "src"
    shutil.copytree(REPO, source, symlinks=True, ignore=_ignore)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-cache-dir", "--quiet", "-w", str(workdir / "dist"), str(source)],
        capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = (workdir / "dist").glob("adaptedge-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(workdir / "site")
        return BuiltWheel(archive.namelist(), workdir / "site")
