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


def test_simulate_refuses_a_regression_bundle_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, bundle = train_tiny_regression(tmp_path)
    capsys.readouterr()
    assert main(["simulate", "--bundle", str(bundle), "--data", str(data), "--report",
                 str(tmp_path / "r"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not replay regression bundles yet" in err and "\n" not in err
    assert not (tmp_path / "r").exists()
