"""``adaptedge evaluate --json`` on a trained regression bundle (issue 33 acceptance): per point
``mse``, ``mae`` and ``cost`` on the split and the HPC's ``mse``/``mae``, equal to the errors of
the exported models run here independently (onnxruntime on the split's rows)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main
from adaptedge.protocol.bundle import verify
from adaptedge.protocol.walk import walk_manifest
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.export.run import run_onnx
from tests.support.tiny_regression import train_tiny_regression


def test_evaluate_json_reports_mse_mae_cost_per_point_and_the_hpc(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, bundle = train_tiny_regression(tmp_path)
    capsys.readouterr()
    assert main(["evaluate", "--bundle", str(bundle), "--data", str(data), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    m = verify(bundle)
    d = load_dataset(str(data), target="temp", task="regression")
    X, y = d.X_test.astype(np.float32), d.targets("test")
    hpc = run_onnx((bundle / "hpc.onnx").read_bytes(), X, "value")[:, 0].astype(np.float64)
    assert report["task"] == "regression" and report["rule_metric"] == "mae"
    assert report["tolerance"] == pytest.approx(m.metadata["tolerance"])
    assert report["hpc"]["mse"] == pytest.approx(np.mean((hpc - y) ** 2), rel=1e-9)
    assert report["hpc"]["mae"] == pytest.approx(np.mean(np.abs(hpc - y)), rel=1e-9)
    assert [p["name"] for p in report["points"]] == [p.name for p in m.operating_points]

    def run(file: str, x: np.ndarray, scores: str | None
            ) -> tuple[np.ndarray, np.ndarray | None]:
        onnx_bytes = (bundle / file).read_bytes()
        return run_onnx(onnx_bytes, x, "value"), (
            run_onnx(onnx_bytes, x, scores) if scores else None)

    for point, row in zip(m.operating_points, report["points"], strict=True):
        walk = walk_manifest(m, point.policy, X, run)
        values = np.where(walk.escalated, hpc, walk.values.astype(np.float64))
        assert row["mse"] == pytest.approx(np.mean((values - y) ** 2), rel=1e-9)
        assert row["mae"] == pytest.approx(np.mean(np.abs(values - y)), rel=1e-9)
        assert row["cost"] > 0 and np.isfinite(row["validation_paired_bound"])
    assert main(["evaluate", "--bundle", str(bundle), "--data", str(data)]) == 0
    text = capsys.readouterr().out
    assert "MSE" in text and "MAE" in text and "accuracy" not in text
