"""Each distribution's sdist carries its tests (issue 30): ``tests/<name>/`` (the command's are
``tests/cli/``), the shared ``tests/conftest.py``, ``tests/__init__.py`` and ``tests/support/``, and
every other ``tests.*`` module they import, copied in by the ``_sdist_tests.py`` hook, and the hook
itself (a wheel is built from the sdist); the tests are collected there against the sdist's code.

The full runs (each distribution's tests passing from its unpacked sdist) take as long as the
suite and are not repeated here; see the README's development section.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.support.untraced import untraced_env
from tests.support.wheel import DISTRIBUTIONS, TESTS_OF, BuiltSdist, build_sdists

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "_sdist_tests.py"
"""The hook; each sub-distribution's ``src/_sdist_tests.py`` is a stub that runs it."""


def _pyproject(folder: str) -> dict[str, Any]:
    return tomllib.loads((REPO / folder / "pyproject.toml").read_text())


def test_every_distribution_names_the_same_hook() -> None:
    stub = (REPO / "protocol" / "src" / "_sdist_tests.py").read_text()
    assert '"_sdist_tests.py"' in stub and "parents[2]" in stub
    for folder in DISTRIBUTIONS:
        config = _pyproject(folder)["tool"]["setuptools"]
        assert config["cmdclass"] == {"sdist": "_sdist_tests.SdistWithTests"}, folder
        if folder != ".":
            assert (REPO / folder / "src" / "_sdist_tests.py").read_text() == stub, folder


def test_the_tests_run_with_the_root_pytest_settings() -> None:
    """The sdists' tests run with their own pyproject.toml: the same settings as the suite's."""
    root = _pyproject(".")["tool"]["pytest"]["ini_options"]
    for folder in DISTRIBUTIONS:
        assert _pyproject(folder)["tool"]["pytest"]["ini_options"] == root, folder


@pytest.fixture(scope="module")
def sdists(tmp_path_factory: pytest.TempPathFactory) -> list[BuiltSdist]:
    return build_sdists(tmp_path_factory.mktemp("sdists"))


def _repo_files(folder: Path) -> set[str]:
    return {p.relative_to(REPO).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.slow
def test_each_sdist_carries_its_tests_as_files(sdists: list[BuiltSdist]) -> None:
    shared = _repo_files(REPO / "tests" / "support") | {"tests/__init__.py", "tests/conftest.py"}
    for sdist in sdists:
        name = TESTS_OF[sdist.folder]
        top = sdist.members[0].name.split("/")[0]
        members = {m.name.removeprefix(top + "/") for m in sdist.members if m.isfile()}
        assert all(m.isfile() or m.isdir() for m in sdist.members), "links or devices"
        missing = (_repo_files(REPO / "tests" / name) | shared) - members
        assert not missing, f"the {name} sdist lacks {sorted(missing)}"
        assert not {m for m in members if m.startswith("tests/test_")}, (
            "the repository-wide checks do not belong to one distribution")
        # the hook itself, whole (not the stub), so a wheel builds from the sdist
        hook = sdist.unpacked / ("_sdist_tests.py" if sdist.folder == "." else "src/_sdist_tests.py")
        assert hook.read_text() == HOOK.read_text(), sdist.folder


@pytest.mark.slow
def test_each_sdists_tests_collect_against_its_code(sdists: list[BuiltSdist]) -> None:
    """From the unpacked sdist, with its sources first on the path: the package comes from
    there, and every test module imports (conftest, support and shared helpers included)."""
    for sdist in sdists:
        name = TESTS_OF[sdist.folder]
        code = sdist.unpacked if sdist.folder == "." else sdist.unpacked / "src"
        env = untraced_env(PYTHONPATH=str(code))  # the copy's code: coverage measures none
        # one interpreter: where the package comes from (first line), then the collection
        script = (f"import sys, pytest, adaptedge.{name} as m; print(m.__file__, flush=True); "
                  f"sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', "
                  f"'tests/{name}']))")
        collect = subprocess.run([sys.executable, "-c", script], cwd=sdist.unpacked, env=env,
                                 capture_output=True, text=True, timeout=240)
        assert collect.returncode == 0, collect.stdout[-2500:] + collect.stderr[-1500:]
        where = collect.stdout.splitlines()[0].strip()
        assert Path(where).is_relative_to(code), where
        assert f"tests/{name}/" in collect.stdout
