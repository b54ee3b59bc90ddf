"""After ``make test``: one line per product package with its statement coverage, then the total.

``python -m tests.support.coverage_summary`` reads the combined ``.coverage`` data file that
``coverage run`` (configured in ``pyproject.toml``) left in the repository root.
"""

from __future__ import annotations

import sys
from pathlib import Path

import coverage

PACKAGES = ("protocol", "edge", "cloud", "trainer", "simulator", "cli")


def package_of(path: str) -> str | None:
    """``edge`` for ``.../adaptedge/edge/runtime.py``; None for a file of no product package."""
    parts = Path(path).parts
    places = [i for i, part in enumerate(parts[:-1]) if part == "adaptedge"]
    if not places or places[-1] + 1 >= len(parts) - 1:
        return None
    name = parts[places[-1] + 1]
    return name if name in PACKAGES else None


def summary(cov: coverage.Coverage) -> dict[str, tuple[int, int]]:
    """``{package: (statements, statements run)}`` over every measured file."""
    totals = dict.fromkeys(PACKAGES, (0, 0))
    for path in cov.get_data().measured_files():
        package = package_of(path)
        if package is None:
            continue
        _, statements, _, missing, _ = cov.analysis2(path)
        n, run = totals[package]
        totals[package] = (n + len(statements), run + len(statements) - len(missing))
    return totals


def main() -> int:
    cov = coverage.Coverage()
    cov.load()
    totals = summary(cov)
    totals["total"] = (sum(n for n, _ in totals.values()), sum(r for _, r in totals.values()))
    print("coverage of statements, per package:")
    for package, (n, run) in totals.items():
        share = f"{100 * run / n:5.1f}%" if n else "  n/a"
        print(f"  {package:<10} {share}  ({run} of {n} statements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
