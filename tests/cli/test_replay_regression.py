"""Replay parity on a trained regression bundle (issue 33 acceptance): ``edge run --replay``
on the device bundle answers, row by row, the values ``evaluate`` scores (the exported ONNX
walked in a batch) to float32 precision, and its summary's error equals evaluate's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main
from adaptedge.protocol.bundle import verify
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.policy.oracle import BundleRunner
from tests.support.tiny_regression import train_tiny_regression


@pytest.mark.parametrize("method", ["cstc", "greedy-miser"])
def test_replay_values_equal_evaluate_to_float32(
        method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, bundle = train_tiny_regression(tmp_path, method)
    m = verify(bundle)
    journal = tmp_path / "run.jsonl"
    assert main(["edge", "run", "--bundle", str(tmp_path / "bundle-device"), "--replay",
                 str(data), "--split", "test", "--json-out", str(journal)]) == 0
    capsys.readouterr()
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    decisions = [r for r in records if r["kind"] == "decision"]
    d = load_dataset(str(data), target="temp", task="regression")
    y = d.targets("test")
    assert len(decisions) == len(y) and all(r["label"] == "" for r in decisions)
    replayed = np.array([r["value"] for r in decisions], dtype=np.float64)
    expected = BundleRunner.from_dir(bundle).evaluate(m.default_operating_point, d.X_test, y)
    np.testing.assert_allclose(replayed, expected.values, rtol=1e-6, atol=1e-6)
    assert [float(r["truth"]) for r in decisions] == y.tolist()
    assert main(["evaluate", "--bundle", str(bundle), "--data", str(data), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    row = next(p for p in report["points"] if p["default"])
    assert np.mean((replayed - y) ** 2) == pytest.approx(row["mse"], rel=1e-5)
    assert np.mean(np.abs(replayed - y)) == pytest.approx(row["mae"], rel=1e-5)


@pytest.mark.slow
def test_simulate_errors_equal_evaluate_per_point(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """simulate's per-point MSE and MAE (and the HPC's) are evaluate --json's on the split,
    escalations answered by the HPC's value; the report speaks in the target's unit."""
    data, bundle = train_tiny_regression(tmp_path, "confidence", costs=True)
    capsys.readouterr()
    m = verify(bundle)
    assert max(p.escalation_rate for p in m.operating_points) > 0
    costs = ["--costs", str(tmp_path / "costs.toml")]
    assert main(["evaluate", "--bundle", str(bundle), "--data", str(data), "--target", "temp",
                 *costs, "--split", "test", "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    out = tmp_path / "r"
    assert main(["simulate", "--bundle", str(bundle), "--data", str(data), "--target", "temp",
                 "--split", "test", "--report", str(out), "--no-progress"]) == 0
    shown = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert report["task"] == "regression" and report["target"]["name"] == "temp"
    frontier = {p["label"]: p for p in report["frontier"] if p["group"] != "baseline"}
    assert set(frontier) == {p["name"] for p in evaluated["points"]}
    escalated = 0.0
    for point in evaluated["points"]:
        sim = frontier[point["name"]]
        assert sim["mse"] == pytest.approx(point["mse"], rel=1e-6)
        assert sim["mae"] == pytest.approx(point["mae"], rel=1e-6)
        assert sim["rmse"] == pytest.approx(np.sqrt(point["mse"]), rel=1e-6)
        assert sim["scalar"] == pytest.approx(point["cost"], rel=1e-9)
        assert sim["accuracy"] is None
        escalated = max(escalated, sim["sent_rate"])
    assert escalated > 0  # the HPC answered some rows of some point
    hpc = report["baselines"]["hpc_always"]
    assert hpc["mse"] == pytest.approx(evaluated["hpc"]["mse"], rel=1e-6)
    assert hpc["mae"] == pytest.approx(evaluated["hpc"]["mae"], rel=1e-6)
    assert report["summary"]["mse"] == pytest.approx(
        frontier[report["summary"]["operating_point"]]["mse"], rel=1e-12)
    assert "MSE" in shown and "RMSE" in shown and "accuracy" not in shown
    md = (out / "report.md").read_text()
    assert "| | MSE | MAE | RMSE |" in md and "Error vs cost" in md
    assert (out / "frontier.png").stat().st_size > 0
