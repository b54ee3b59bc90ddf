"""House rule, checked on the source: one concept per module (a reviewer's call, not a line
count) and no product function over 80 lines (methods and nested functions included; a
function's lines run from its ``def`` to its last line, docstring included).

Product code is every ``.py`` file of each distribution's package (``<name>/src/adaptedge/<name>/``
for protocol, edge, cloud, trainer and simulator) and of the command (``adaptedge/cli/``).
Nothing is skipped: a symbolic link or an unparsable file inside these folders fails the test
instead of being passed over.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = ("protocol", "edge", "cloud", "trainer", "simulator")
PRODUCT_FOLDERS = (*(f"{name}/src/adaptedge/{name}" for name in DISTRIBUTIONS), "adaptedge/cli")
MAX_FUNCTION_LINES = 80


def _walk(top: Path, root: Path = REPO) -> list[Path]:
    """Every ``.py`` file under ``top``; a link anywhere on the way fails (it would hide code)."""
    rel = top.relative_to(root)
    for part in (top, *top.parents):
        if part == root:
            break
        assert not part.is_symlink(), f"{part.relative_to(root)} is a link: the check would "\
            "not see what it holds"
    assert top.is_dir(), f"{rel}/ is not a folder any more: has the package moved?"
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in dirnames + filenames:
            assert not (Path(dirpath) / name).is_symlink(), (
                f"{Path(dirpath, name).relative_to(root)} is a link: the size check would "
                "not see what it points at")
        found += [Path(dirpath) / f for f in filenames if f.endswith(".py")]
    assert found, f"no Python file under {rel}/: has it moved?"
    return found


def product_files() -> list[Path]:
    """Every product ``.py`` file, each read once through its real folder."""
    return sorted(p for folder in PRODUCT_FOLDERS for p in _walk(REPO / folder))


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.relative_to(REPO)}:{node.lineno} {node.name} "
            f"({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def test_the_walk_sees_the_whole_product() -> None:
    files = {p.relative_to(REPO).as_posix() for p in product_files()}
    for expected in ("adaptedge/cli/main.py", "protocol/src/adaptedge/protocol/manifest.py",
                     "edge/src/adaptedge/edge/runtime.py",
                     "cloud/src/adaptedge/cloud/service/core.py",
                     "trainer/src/adaptedge/trainer/hpc.py",
                     "simulator/src/adaptedge/simulator/hil.py"):
        assert expected in files
    # nothing beside the packages: adaptedge is a namespace, so no module stands outside them
    stray = [p.relative_to(REPO).as_posix() for top in ("adaptedge", *(
        f"{name}/src/adaptedge" for name in DISTRIBUTIONS)) for p in (REPO / top).glob("*.py")]
    assert stray == [], f"modules outside the product packages: {stray}"
    # every package's modules, not only its top folder
    for name in DISTRIBUTIONS:
        assert any(f.startswith(f"{name}/src/adaptedge/{name}/") for f in files), name


def test_a_link_in_a_product_folder_fails_the_walk(tmp_path: Path) -> None:
    """The walk refuses links, so code behind one cannot escape the function limit."""
    top = tmp_path / "pkg"
    (top / "sub").mkdir(parents=True)
    (top / "real.py").write_text("x = 1\n")
    assert _walk(top, tmp_path) == [top / "real.py"]
    (top / "sub" / "linked.py").symlink_to(top / "real.py")
    with pytest.raises(AssertionError, match="is a link"):
        _walk(top, tmp_path)
    (top / "sub" / "linked.py").unlink()
    (tmp_path / "alias").symlink_to(top)
    with pytest.raises(AssertionError, match="is a link"):
        _walk(tmp_path / "alias", tmp_path)


@pytest.mark.slow
def test_no_product_function_over_80_lines() -> None:
    offenders = [line for p in product_files() for line in long_functions(p)]
    assert offenders == [], (
        f"split these functions (max {MAX_FUNCTION_LINES} lines): {offenders}")
