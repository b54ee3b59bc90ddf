"""The environment for a subprocess that runs none of the measured code (a build, an import of
an unpacked copy): ``make test`` measures subprocesses through variables coverage sets in
``os.environ`` (``[tool.coverage.run] patch = ["subprocess"]``); without them the child starts
untraced, and spends no tracer time on code no report counts."""

from __future__ import annotations

import os

COVERAGE_STARTERS = ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG")


def untraced_env(**extra: str) -> dict[str, str]:
    """``os.environ`` without coverage's start-up variables, with ``extra`` set."""
    env = {k: v for k, v in os.environ.items() if k not in COVERAGE_STARTERS}
    env.update(extra)
    return env
