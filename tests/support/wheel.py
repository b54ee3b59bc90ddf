"""The distributions as users get them, built from a copy of the repository: every wheel unpacked
into one folder, and every sdist unpacked into a folder of its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support.untraced import untraced_env

REPO = Path(__file__).resolve().parents[2]
TOP_LEVEL_SKIP = {".venv", ".git", "build", "dist", "benchmarks", "tests"}
DISTRIBUTIONS = (".", "protocol", "edge", "cloud", "trainer", "simulator")
"""Each folder with its own ``pyproject.toml`` ("." is the root: the ``adaptedge`` command)."""
TESTS_OF = {".": "cli", "protocol": "protocol", "edge": "edge", "cloud": "cloud",
            "trainer": "trainer", "simulator": "simulator"}
"""The folder of ``tests/`` that holds each distribution's tests."""


@dataclass(frozen=True)
class BuiltWheel:
    names: list[str]
    """Every path in the wheels."""
    site: Path
    """Where they are unpacked (put it on ``PYTHONPATH``)."""
    by_wheel: dict[str, list[str]]
    """The paths of each wheel, by its distribution name (``adaptedge_edge``, ...)."""


def _ignore_in(root: Path, top_level: set[str]) -> Callable[[str, list[str]], set[str]]:
    def ignore(folder: str, names: list[str]) -> set[str]:
        skip = {n for n in names if n == "__pycache__" or n.endswith(("_cache", ".egg-info"))
                or n.startswith(".coverage")}
        return skip | (top_level & set(names) if Path(folder) == root else set())
    return ignore


def copy_repository(dest: Path, *, with_tests: bool = False) -> Path:
    """A copy of the repository's sources at ``dest`` (builds write their egg-info there, never
    into the repository); ``with_tests`` keeps ``tests/``, which the sdists carry."""
    skip = TOP_LEVEL_SKIP - {"tests"} if with_tests else TOP_LEVEL_SKIP
    shutil.copytree(REPO, dest, ignore=_ignore_in(REPO, skip))
    return dest


def build_wheel(workdir: Path) -> BuiltWheel:
    """Build every distribution's wheel from a copy of the repository under ``workdir`` and
    unpack them all into one site folder there."""
    source = copy_repository(workdir / "src")
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-cache-dir", "--quiet", "-w", str(workdir / "dist"),
         *(str(source / folder) for folder in DISTRIBUTIONS)],
        capture_output=True, text=True, timeout=240, env=untraced_env())
    assert out.returncode == 0, out.stderr[-2000:]
    for wheel in sorted((workdir / "dist").glob("adaptedge*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(workdir / "site")
    return read_wheels(workdir)


def read_wheels(workdir: Path) -> BuiltWheel:
    """The wheels ``build_wheel(workdir)`` built and unpacked (another worker may have)."""
    names: list[str] = []
    by_wheel: dict[str, list[str]] = {}
    for wheel in sorted((workdir / "dist").glob("adaptedge*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            by_wheel[wheel.name.split("-")[0]] = archive.namelist()
            names += archive.namelist()
    return BuiltWheel(names, workdir / "site", by_wheel)


@dataclass(frozen=True)
class BuiltSdist:
    folder: str
    """The distribution's folder in the repository ("." for the root)."""
    archive: Path
    members: list[tarfile.TarInfo]
    unpacked: Path
    """The unpacked sdist (its ``pyproject.toml`` is at the top)."""


def build_sdists(workdir: Path) -> list[BuiltSdist]:
    """Every distribution's sdist, built (``python -m build --sdist``, no isolation: offline)
    from a copy of the repository with its tests, and unpacked under ``workdir``."""
    source = copy_repository(workdir / "src", with_tests=True)
    built = []
    for folder in DISTRIBUTIONS:
        dist = workdir / "dist" / TESTS_OF[folder]
        out = subprocess.run(
            [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(dist),
             str(source / folder)], capture_output=True, text=True, timeout=240,
            env=untraced_env())
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        (archive,) = dist.glob("*.tar.gz")
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            tar.extractall(workdir / "unpacked" / TESTS_OF[folder], filter="data")
        (unpacked,) = (workdir / "unpacked" / TESTS_OF[folder]).iterdir()
        built.append(BuiltSdist(folder, archive, members, unpacked))
    return built
