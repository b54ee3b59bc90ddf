"""A pytest plugin that prints the tests that took the most CPU (not wall) seconds.

    make test PYTEST_ARGS="-p tests.support.cpu_durations"

Each test's user + system seconds of its worker and of the subprocesses it waited for
(``resource.getrusage``), setup and teardown included; pytest-xdist's workers send theirs to the
controller, which prints the ``CPU_DURATIONS`` slowest and the total
(``ADAPTEDGE_CPU_DURATIONS=N`` prints N, and ``ADAPTEDGE_CPU_DURATIONS_JSON=PATH`` writes every
test's seconds there). A subprocess a test leaves running (a broker) is not counted. Profiling
only: it changes no test.
"""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Generator
from typing import Any

import pytest

CPU_DURATIONS = int(os.environ.get("ADAPTEDGE_CPU_DURATIONS", "40"))
KEY = "cpu_seconds"


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


_STARTS = pytest.StashKey[dict[str, float]]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.config.stash.setdefault(_STARTS, {})[item.nodeid] = cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    if call.when == "teardown":  # the report a worker sends last for this test
        start = item.config.stash.get(_STARTS, {}).get(item.nodeid)
        if start is not None:
            outcome.get_result().user_properties.append((KEY, cpu_seconds() - start))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for key, value in report.user_properties:
        if key == KEY and report.when == "teardown":
            _TOTALS[report.nodeid] = float(value)


_TOTALS: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _TOTALS:
        return
    terminalreporter.section(f"slowest {CPU_DURATIONS} by CPU seconds")
    for nodeid, seconds in sorted(_TOTALS.items(), key=lambda kv: -kv[1])[:CPU_DURATIONS]:
        terminalreporter.write_line(f"{seconds:8.2f} CPU s  {nodeid}")
    dump = os.environ.get("ADAPTEDGE_CPU_DURATIONS_JSON")
    if dump:
        with open(dump, "w", encoding="utf-8") as f:
            json.dump(_TOTALS, f, indent=0, sort_keys=True)
    terminalreporter.write_line(f"{sum(_TOTALS.values()):8.2f} CPU s in all "
                                f"({len(_TOTALS)} tests)")
