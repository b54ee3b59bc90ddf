"""No statistic is chosen on test (issue 20 item 3).

Scans the benchmark, trainer, protocol and CLI code (the paired rule of issue 36 lives in
``protocol.operating_points``, its per-method sequences in ``protocol.method_sequences``; the
trainer and ``adaptedge evaluate`` apply them) for selections
that read test results: a ``max``/``min``/``sorted``/``argmax``/``argmin`` call over something
that mentions test (a ``"test"`` key, a
``*_test``/``test_*`` name), or a comprehension that filters on such a thing. Points are chosen
on validation and only reported on test; a line that must read test inside such a call (e.g. a
row-wise ``argmax`` over test class probabilities, which predicts and does not select) carries
``# reports-test`` with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("benchmarks", "trainer", "protocol", "adaptedge")
SELECTORS = {"max", "min", "sorted", "argmax", "argmin", "nanargmax", "nanargmin"}


def _mentions_test(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and sub.value == "test":
            return True
        name = sub.id if isinstance(sub, ast.Name) else (
            sub.attr if isinstance(sub, ast.Attribute) else None)
        if name is not None and (name == "test" or name.endswith("_test")
                                 or name.startswith("test_")):
            return True
    return False


def _callee(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def violations(source: str, filename: str) -> list[str]:
    """``file:line`` of every selection over test results in ``source``."""
    lines = source.splitlines()
    found = []
    comprehensions = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
    for node in ast.walk(ast.parse(source, filename)):
        bad = False
        if isinstance(node, ast.Call) and _callee(node) in SELECTORS:
            bad = any(_mentions_test(a) for a in [*node.args, *node.keywords])
        elif isinstance(node, comprehensions):
            bad = any(_mentions_test(cond) for gen in node.generators for cond in gen.ifs)
        if bad and "# reports-test" not in lines[node.lineno - 1]:
            found.append(f"{filename}:{node.lineno}")
    return found


def _scanned_files() -> list[Path]:
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py"))


@pytest.mark.slow
def test_no_selection_over_test_results() -> None:
    found = [v for path in _scanned_files()
             for v in violations(path.read_text(), str(path.relative_to(ROOT)))]
    assert not found, f"statistics chosen on test (choose on validation, report on test): {found}"


def test_the_scan_covers_the_paired_rule_paths() -> None:
    scanned = {str(p.relative_to(ROOT)) for p in _scanned_files()}
    for path in ("protocol/src/adaptedge/protocol/operating_points.py",
                 "protocol/src/adaptedge/protocol/method_sequences.py",
                 "benchmarks/certify_sim.py",
                 "trainer/src/adaptedge/trainer/export/bundle.py",
                 "trainer/src/adaptedge/trainer/api.py",
                 "trainer/src/adaptedge/trainer/recalibrate.py",
                 "adaptedge/cli/evaluate.py",
                 "trainer/src/adaptedge/trainer/methods/confidence_cascade.py",
                 "trainer/src/adaptedge/trainer/methods/auto.py",
                 "benchmarks/auto.py"):
        assert path in scanned


def test_the_scan_catches_the_old_choices() -> None:
    old_adapt = (
        'on_test = [p for p in points if p["test"]["accuracy"] >= hpc_test]\n'
        'p = min(on_test, key=lambda p: (p["test"]["cost"], -p["test"]["accuracy"]))\n')
    old_dag = 'top = max((p["test"]["accuracy"] for p in esc), default=None)\n'
    assert len(violations(old_adapt, "old_adapt.py")) == 2
    assert len(violations(old_dag, "old_dag.py")) == 1
    fine = ('ok = [p for p in points if p["val"]["accuracy"] >= target]\n'
            'best = min(ok, key=lambda p: p["val"]["cost"])\n'
            'report = best["test"]["accuracy"]\n')
    assert violations(fine, "fine.py") == []
