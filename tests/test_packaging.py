"""The distributions install one import name, ``adaptedge``, and nothing else at the top level;
each holds its own package only, and the device's (``adaptedge-edge``) pulls nothing heavy."""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.wheel import BuiltWheel

REPO = Path(__file__).resolve().parents[1]
OLD_NAMES = ("protocol", "trainer", "edge", "cloud", "simulator", "adaptedge_cli")
SOURCE_FOLDERS = ("protocol", "trainer", "edge", "cloud", "simulator", "adaptedge", "tests", "benchmarks")


def _python_files() -> list[Path]:
    files: list[Path] = []
    for folder in SOURCE_FOLDERS:
        for path in (REPO / folder).rglob("*.py"):
            files.append(path)
    return files


@pytest.mark.slow
def test_no_module_imports_a_bare_top_level_name() -> None:
    """``import protocol`` would load a second copy of ``adaptedge.protocol`` beside it."""
    offenders = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(REPO)}:{node.lineno} {name}" for name in names
                          if name.split(".")[0] in OLD_NAMES]
    assert offenders == [], "import through adaptedge.*: " + ", ".join(offenders)


@pytest.mark.slow
def test_wheel_holds_only_adaptedge(built_wheel: BuiltWheel, tmp_path: Path) -> None:
    names = built_wheel.names
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"adaptedge"}
    assert "adaptedge/simulator/scenarios/ideal.toml" in names
    code = ("import adaptedge.edge, adaptedge.cloud; "
            "print(adaptedge.edge.__file__)")
    env = {"PYTHONPATH": str(built_wheel.site), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().startswith(str(built_wheel.site))
    for old in OLD_NAMES:
        gone = subprocess.run([sys.executable, "-c", f"import {old}"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        assert gone.returncode != 0 and "ModuleNotFoundError" in gone.stderr, old


@pytest.mark.slow
def test_each_wheel_holds_its_own_package(built_wheel: BuiltWheel) -> None:
    own = {"adaptedge": "adaptedge/cli/", **{f"adaptedge_{n}": f"adaptedge/{n}/" for n in (
        "protocol", "edge", "cloud", "trainer", "simulator")}}
    assert set(built_wheel.by_wheel) == set(own)
    for wheel, names in built_wheel.by_wheel.items():
        strays = [n for n in names if not n.startswith((own[wheel], f"{wheel}-"))]
        assert strays == [], f"{wheel} holds {strays[:5]}"


HEAVY = {"scikit-learn", "scipy", "skl2onnx", "matplotlib", "sqlalchemy", "dask",
         "adaptedge", "adaptedge-trainer", "adaptedge-cloud", "adaptedge-simulator"}
"""What a device install (``pip install ./protocol ./edge``) must not pull."""


def dependency_closure(distribution: str) -> set[str]:
    """Every distribution ``distribution`` needs, by its installed metadata (no extras)."""
    seen: set[str] = set()
    todo = [canonicalize_name(distribution)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} (needed by {distribution}) is not installed: the closure is "
                        "read from the installed metadata; install the dev environment")
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen - {canonicalize_name(distribution)}


def test_the_device_install_pulls_nothing_heavy() -> None:
    closure = dependency_closure("adaptedge-edge")
    assert {"adaptedge-protocol", "onnxruntime", "paho-mqtt", "numpy"} <= closure
    assert closure & HEAVY == set(), f"adaptedge-edge pulls {sorted(closure & HEAVY)}"


def test_the_closure_sees_a_heavy_dependency() -> None:
    """The check can fail: the simulator's closure holds the trainer and scikit-learn."""
    assert {"adaptedge-trainer", "scikit-learn", "matplotlib"} <= dependency_closure(
        "adaptedge-simulator")


def test_the_repository_tracks_no_link() -> None:
    """A clone with ``core.symlinks=false`` (Windows' default) installs: git holds no link."""
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-s"], cwd=REPO, capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0, listed.stderr
    links = [line.split("\t")[-1] for line in listed.stdout.splitlines()
             if re.match(r"120000 ", line)]
    assert links == [], f"symbolic links in git: {links}"


def test_benchmark_imports_resolve() -> None:
    """mypy does not check benchmarks/: every ``from adaptedge... import name`` there (also inside
    functions) must name a module and attribute that exist, or a benchmark dies mid-run."""
    import importlib
    import importlib.util

    missing = []
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    and node.module.split(".")[0] == "adaptedge"):
                continue
            module = importlib.import_module(node.module)
            missing += [f"{path.name}:{node.lineno} {node.module}.{alias.name}"
                        for alias in node.names if not hasattr(module, alias.name)
                        and importlib.util.find_spec(f"{node.module}.{alias.name}") is None]
    assert missing == [], f"benchmarks import names that do not exist: {missing}"
