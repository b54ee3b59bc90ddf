"""House rule, checked on the source: no product file over 400 lines, no product function over
80 lines (methods and nested functions included; a function's lines run from its ``def`` to
its last line, docstring included).

Product code is every ``.py`` file under the real folders below (``adaptedge/protocol`` and the
other links point at them, so they are read once, through the folder itself) plus the files
directly in ``adaptedge/``. Nothing is skipped: a symbolic link or an unparsable file inside
these folders fails the test instead of being passed over.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT_FOLDERS = ("protocol", "trainer", "edge", "cloud", "simulator", "adaptedge/cli")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80


def product_files() -> list[Path]:
    """Every product ``.py`` file; refuses links inside the folders (they would hide code)."""
    files: list[Path] = []
    for folder in PRODUCT_FOLDERS:
        top = REPO / folder
        assert top.is_dir() and not top.is_symlink(), f"{folder}/ is not a real folder any more"
        found = []
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in dirnames + filenames:
                assert not (Path(dirpath) / name).is_symlink(), (
                    f"{Path(dirpath, name).relative_to(REPO)} is a link: the size check would "
                    "not see what it points at")
            found += [Path(dirpath) / f for f in filenames if f.endswith(".py")]
        assert found, f"no Python file under {folder}/: has it moved?"
        files += found
    return sorted(files)


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
                     "cloud/src/adaptedge/cloud/service/worker.py",
                     "simulator/src/adaptedge/simulator/hil.py"):
        assert expected in files


def test_no_product_file_over_400_lines() -> None:
    offenders = [f"{p.relative_to(REPO)} ({n} lines)" for p in product_files()
                 if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES]
    assert offenders == [], f"split these files (max {MAX_FILE_LINES} lines): {offenders}"


def test_no_product_function_over_80_lines() -> None:
    offenders = [line for p in product_files() for line in long_functions(p)]
    assert offenders == [], (
        f"split these functions (max {MAX_FUNCTION_LINES} lines): {offenders}")
