"""setuptools ``sdist`` hook: a distribution's sdist carries its tests.

The tests live in the repository's top-level ``tests/<name>/`` (they mirror the code; the
command's are ``tests/cli/``), beside the shared ``tests/conftest.py``, ``tests/__init__.py`` and
``tests/support/``. The sdist copies them in as files (no links), with every other ``tests.*``
module they import (a few tests share a helper with another package's tests); built again from an
unpacked sdist, it copies them from there. ``[tool.setuptools] cmdclass`` only loads a module from
the distribution's own folder, so each distribution's ``src/_sdist_tests.py`` is a two-line stub
that runs this file; its sdist holds a copy of this file in the stub's place.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from setuptools.command.sdist import sdist


def tests_root(name: str) -> Path:
    """The nearest folder, from this file up, whose ``tests/`` holds ``tests/<name>/`` and the
    shared ``conftest.py``: an unpacked sdist, else the repository."""
    here = Path(__file__).resolve().parent
    for root in (here, *here.parents[:2]):
        if (root / "tests" / name).is_dir() and (root / "tests" / "conftest.py").is_file():
            return root
    raise FileNotFoundError(f"no tests/{name}/ at or above {here}: build the sdist from the "
                            "repository (or from an sdist built there)")


def _imported(root: Path, path: Path) -> set[Path]:
    """The files of the ``tests.*`` modules ``path`` imports, with their packages' ``__init__``."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    found = set()
    for module in (m for m in modules if m.split(".")[0] == "tests"):
        base = root.joinpath(*module.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                found |= {candidate, *(p / "__init__.py" for p in candidate.parents
                                       if p.is_relative_to(root / "tests"))}
    return found


def files_for_tests(root: Path, name: str) -> set[Path]:
    """``tests/<name>/``, the shared test files, and every ``tests.*`` module they import."""
    tests = root / "tests"
    start = {tests / "__init__.py", tests / "conftest.py",
             *(p for folder in (tests / name, tests / "support") for p in folder.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts)}
    files, todo = set(), list(start)
    while todo:
        path = todo.pop()
        if path not in files:
            files.add(path)
            todo += _imported(root, path) if path.suffix == ".py" else []
    return files


class SdistWithTests(sdist):
    """``sdist`` that adds the distribution's tests to the release tree."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        out = Path(base_dir)
        dist = self.distribution.get_name()
        name = "cli" if dist == "adaptedge" else dist.removeprefix("adaptedge-")
        # A wheel is built from the sdist: it needs this hook whole, in place of the stub. The
        # release tree may hard-link the source files, so the stub's link goes, never its file.
        hook = out / ("_sdist_tests.py" if name == "cli" else "src/_sdist_tests.py")
        if not (hook.exists() and hook.samefile(__file__)):
            hook.unlink(missing_ok=True)
            shutil.copyfile(__file__, hook)
        root = tests_root(name)
        for path in sorted(files_for_tests(root, name)):
            target = out / path.relative_to(root)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
