"""No module of the command line or of any package imports itself back through others, at module
level or inside a function (``cli/edge_drain`` once took ``_tls`` from ``cli/edge_cmd``, which
imported it; ``protocol.bundle`` and ``protocol.signing`` once imported each other)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "adaptedge.cli": ROOT / "adaptedge" / "cli",
    **{f"adaptedge.{name}": ROOT / name / "src" / "adaptedge" / name
       for name in ("protocol", "edge", "cloud", "trainer", "simulator")},
}


def module_name(path: Path, package_dir: Path, package: str) -> str:
    parts = list(path.relative_to(package_dir).with_suffix("").parts)
    return ".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])


def imports_of(path: Path) -> set[str]:
    """Every ``adaptedge.`` module ``path`` imports, wherever the import stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("adaptedge.")}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt in graph and not state.get(nxt):
                cycle = visit(nxt, path)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if not state.get(start) and (cycle := visit(start, [])):
            return cycle
    return None


@pytest.mark.slow
@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_cycle(package: str) -> None:
    package_dir = PACKAGES[package]
    graph = {module_name(p, package_dir, package): imports_of(p)
             for p in package_dir.rglob("*.py")}
    assert graph, f"no modules found under {package_dir}"
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_a_cycle_is_found() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
