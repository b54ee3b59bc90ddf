"""The distribution installs one import name, ``adaptedge``, and nothing else at the top level."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
