"""``adaptedge train --task regression``: a method that cannot learn a regression is refused in
one line naming those that can, before anything is trained or written; cstc and greedy-miser
write a regression bundle and its device bundle to the contract (issue 33, contract items 2-3)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from adaptedge.cli.main import main
from adaptedge.protocol.bundle import verify
from adaptedge.protocol.operating_points import certified_near
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.policy.oracle import BundleRunner
from tests.support.tiny_regression import tiny_regression_csv, train_tiny_regression


@pytest.mark.parametrize("argv", [
    ["--data", "gas-concentration", "--method", "adapt-gbrt"],
    ["--data", "heart", "--task", "regression", "--method", "dag"],
])
def test_methods_without_regression_are_refused_naming_those_with(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", *argv, "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not support --task regression" in err and "cstc, greedy-miser, confidence" in err
    assert "\n" not in err and not (tmp_path / "b").exists()


@pytest.mark.parametrize("method", ["cstc", "greedy-miser"])
def test_regression_bundle_is_written_to_the_contract(method: str, tmp_path: Path) -> None:
    data = tiny_regression_csv(tmp_path / "t.csv")
    out = tmp_path / "b"
    assert main(["train", "--data", str(data), "--target", "temp", "--task", "regression",
                 "--method", method, "--quick", "--no-progress", "--out", str(out)]) == 0
    raw = json.loads((out / "manifest.json").read_text())
    assert raw["schema_version"] == 2 and raw["task"] == "regression"
    assert raw["target"] == {"name": "temp", "unit": ""} and raw["metric"] == "mse"
    assert raw["classes"] == [] and "accuracy" not in raw["hpc"]
    assert raw["hpc"]["mse"] > 0 and raw["hpc"]["mae"] > 0
    m = verify(out)
    dataset = load_dataset(str(data), target="temp", task="regression")
    y_val = dataset.targets("validation")
    for point in raw["operating_points"]:
        assert "accuracy" not in point and point["mse"] >= 0 and point["mae"] >= 0
        assert math.isfinite(point["paired_lower_bound"])
    for point in m.operating_points:  # the stored numbers are the exported ONNX's, remeasured
        assert point.accuracy == -point.mse
        result = BundleRunner.from_dir(out).evaluate(point.policy, dataset.X_val, y_val)
        assert result.mse == pytest.approx(point.mse, rel=1e-6)
        assert result.mae == pytest.approx(point.mae, rel=1e-6)
        assert result.mean_cost == pytest.approx(point.cost)
    tol = m.metadata["tolerance"]
    assert m.metadata["rule_metric"] == "mae" and tol == pytest.approx(0.05 * m.hpc.mae)
    maes = [p.mae for p in m.operating_points]  # the frontier on the rule's error
    assert maes == sorted(maes, reverse=True)
    bounds = [p.paired_lower_bound for p in m.operating_points]
    i = certified_near(list(m.operating_points), bounds, tol)
    assert i is not None and m.operating_points[i].name == m.default_operating_point
    device = verify(tmp_path / "b-device")
    assert device.is_regression and not device.carries_hpc and device.hpc.mse == m.hpc.mse


def test_regression_tolerance_is_refused_for_classification(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--data", "heart", "--method", "l1", "--tolerance", "0.1", "--quick",
                 "--no-progress", "--out", str(tmp_path / "b")]) != 0
    assert "--tolerance applies to regression" in capsys.readouterr().err


def test_inspect_shows_a_regression_bundle_by_its_target_and_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, bundle = train_tiny_regression(tmp_path)
    capsys.readouterr()
    assert main(["inspect", str(bundle)]) == 0
    out = capsys.readouterr().out
    m = verify(bundle)
    assert "task: regression, target temp" in out and "classes" not in out
    assert f"validation MSE {m.hpc.mse:.4g}" in out and "accuracy" not in out
    assert all(f"{p.mse:.4g}" in out for p in m.operating_points)


@pytest.mark.slow
def test_a_regression_default_sweep_includes_the_quick_sweep(tmp_path: Path) -> None:
    data = tiny_regression_csv(tmp_path / "t.csv")
    bundles = {}
    for sweep in ("quick", "default"):
        out = tmp_path / sweep
        assert main(["train", "--data", str(data), "--target", "temp", "--task", "regression",
                     "--method", "greedy-miser", "--no-progress", "--out", str(out),
                     *(["--quick"] if sweep == "quick" else [])]) == 0
        bundles[sweep] = verify(out)
    # greedy-miser: 3 gammas by default, 2 quick; all five are candidates of the default run
    assert bundles["default"].metadata["n_candidates"] == 5
    assert bundles["quick"].metadata["n_candidates"] == 2
