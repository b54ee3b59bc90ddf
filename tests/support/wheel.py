"""The wheels as users get them: every distribution of the repository built with pip from a copy
of it, and all of them unpacked into one folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOP_LEVEL_SKIP = {".venv", ".git", "build", "dist", "benchmarks", "tests"}
DISTRIBUTIONS = (".", "protocol", "edge", "cloud", "trainer", "simulator")
"""Each folder with its own ``pyproject.toml`` ("." is the root: the ``adaptedge`` command)."""


@dataclass(frozen=True)
class BuiltWheel:
    names: list[str]
    """Every path in the wheels."""
    site: Path
    """Where they are unpacked (put it on ``PYTHONPATH``)."""


def _ignore(folder: str, names: list[str]) -> set[str]:
    skip = {n for n in names if n == "__pycache__" or n.endswith(("_cache", ".egg-info"))}
    return skip | (TOP_LEVEL_SKIP & set(names) if Path(folder) == REPO else set())


def build_wheel(workdir: Path) -> BuiltWheel:
    """Build every distribution's wheel from a copy of the repository under ``workdir`` and
    unpack them all into one site folder there."""
    source = workdir / "src"
    shutil.copytree(REPO, source, ignore=_ignore)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-cache-dir", "--quiet", "-w", str(workdir / "dist"),
         *(str(source / folder) for folder in DISTRIBUTIONS)],
        capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    names: list[str] = []
    for wheel in sorted((workdir / "dist").glob("adaptedge*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(workdir / "site")
            names += archive.namelist()
    return BuiltWheel(names, workdir / "site")
