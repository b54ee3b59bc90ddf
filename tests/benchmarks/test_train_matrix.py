"""``benchmarks.train_matrix``: the front comparison and the limits summary; one real run of
the smallest dataset through the CLI, as the benchmark runs it."""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.train_matrix import (
    dominates,
    hpc_method,
    methods_for,
    report,
    run_dataset,
    summary,
    timed_train,
    write_report,
)


def test_dominates_needs_every_quick_point_matched() -> None:
    default = [[0.10, 2.0], [0.05, 5.0]]
    assert dominates(default, [[0.10, 2.0], [0.06, 6.0]])  # equal counts as matched
    assert not dominates(default, [[0.04, 9.0]])  # more accurate than any default point
    assert not dominates(default, [[0.20, 1.0]])  # cheaper than any default point
    assert dominates(default, [])


def test_summary_counts_runs_over_the_limits() -> None:
    ok = {"status": 0, "wall_s": 70.0, "cpu_s": 60.0}
    results = {"d": {"hpc_fit": {"status": 0, "wall_s": 5.0},
                     "m": {"quick": ok, "default": {**ok, "wall_s": 200.0}},
                     "n": {"quick": {"status": 2, "wall_s": 1.0, "cpu_s": 1.0}}}}
    out = summary(results)
    assert out["quick"]["runs"] == 2 and out["quick"]["trained"] == 1
    assert out["quick"]["over_limit"] == ["d/m: 70.0 s"]
    assert out["default"]["over_limit"] == []


def test_methods_for_regression_and_classification() -> None:
    assert "auto" not in methods_for("heart") and "dag" in methods_for("heart")
    assert set(methods_for("gas-concentration")) == {"cstc", "greedy-miser", "confidence"}


def test_the_hpc_is_fitted_by_a_method_the_task_offers() -> None:
    # static refuses regression in one line; the HPC's cold fit then hid in the first method
    assert hpc_method("heart") == "static"
    assert hpc_method("gas-concentration") == "confidence"


@pytest.mark.slow
def test_timed_train_runs_the_cli_and_reads_its_points(tmp_path: Path) -> None:
    env = {**os.environ, "ADAPTEDGE_PROGRESS_EVERY": "0"}  # the run's cache: a shared HPC fit
    row = timed_train("heart", "static", tmp_path / "b", True, env, timeout=600)
    assert row["status"] == 0 and row["cpu_s"] > 0 and row["wall_s"] > 0
    assert row["points"] and all(0.0 <= e <= 1.0 and c >= 0 for e, c in row["points"])
    refused = timed_train("heart", "no-such-method", tmp_path / "c", True, env, timeout=600)
    assert refused["status"] == 2 and "no-such-method" in refused["message"]


@pytest.mark.slow
def test_a_run_past_its_timeout_is_stopped_promptly(tmp_path: Path) -> None:
    # mid-way through a cold HPC fit on joblib workers; the run's process group is killed
    # (workers busy at that moment held its pipes open and kept an earlier version waiting)
    env = {**os.environ, "ADAPTEDGE_PROGRESS_EVERY": "0",
           "ADAPTEDGE_CACHE_DIR": str(tmp_path / "cache")}
    start = time.monotonic()
    row = timed_train("letter-binary", "dag", tmp_path / "b", False, env, timeout=8)
    assert row["status"] == "timeout" and "points" not in row
    assert time.monotonic() - start < 30


def test_a_report_is_replaced_whole_and_says_whether_it_is_complete(tmp_path: Path) -> None:
    path = tmp_path / "matrix.json"
    ok = {"status": 0, "wall_s": 3.0, "cpu_s": 2.0}
    write_report(path, report({"d": {"m": {"quick": ok}}}, 0.5, complete=False))
    first = json.loads(path.read_text())
    assert first["complete"] is False and first["results"]["d"]["m"]["quick"] == ok
    write_report(path, report({}, 0.5, complete=True))
    assert json.loads(path.read_text())["complete"] is True
    assert [f.name for f in tmp_path.iterdir()] == ["matrix.json"]  # no partial file left


@pytest.mark.slow
def test_each_finished_run_is_in_the_entry_when_after_run_is_called(tmp_path: Path) -> None:
    entry: dict[str, Any] = {}
    seen: list[dict[str, Any]] = []
    run_dataset("heart", ["static", "no-such-method"], False, 600.0, tmp_path, entry,
                lambda: seen.append(copy.deepcopy(entry)))
    assert len(seen) == 2  # once per timed run (the HPC's fit is not a method's run)
    assert seen[0]["static"]["quick"]["status"] == 0 and "no-such-method" not in seen[0]
    assert seen[1]["no-such-method"]["quick"]["status"] == 2
    assert seen[1] == entry
