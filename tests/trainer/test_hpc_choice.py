"""``--hpc auto`` keeps the best family on validation, a linear model among them; ``train`` warns
in one line when its HPC is no better than the majority class."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.hpc import fit_hpc


def _write(path: Path, X: np.ndarray, y: np.ndarray) -> Path:
    names = [f"f{j}" for j in range(X.shape[1])]
    rows = [",".join([*names, "label"])]
    rows += [",".join(f"{v:.5f}" for v in X[i]) + f",{y[i]}" for i in range(len(y))]
    path.write_text("\n".join(rows) + "\n")
    return path


def _test_accuracy(model: object, y_test: np.ndarray) -> float:
    return float(np.mean(model.proba_test.argmax(axis=1) == y_test))  # type: ignore[attr-defined]


@pytest.mark.slow
def test_auto_is_at_least_as_accurate_as_logistic_where_a_linear_model_wins(
        tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 12))
    y = (X @ rng.normal(size=12) + 0.5 * rng.normal(size=600) > 0).astype(int)
    data = load_dataset(str(_write(tmp_path / "linear.csv", X, y)), target="label")
    auto = fit_hpc(data, kind="auto", cache=False)
    logistic = fit_hpc(data, kind="logistic", cache=False)
    trees = fit_hpc(data, kind="extra-trees", cache=False)
    assert _test_accuracy(trees, data.y_test) < _test_accuracy(logistic, data.y_test)  # linear wins
    assert _test_accuracy(auto, data.y_test) >= _test_accuracy(logistic, data.y_test)
    assert auto.description.startswith(("logistic", "hgb", "extra-trees")) and auto.onnx_bytes()


@pytest.mark.slow
def test_train_warns_when_the_hpc_is_no_better_than_the_majority_class(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(2)
    X = rng.normal(size=(240, 4))
    y = (rng.random(240) < 0.3).astype(int)  # labels unrelated to the features
    data = _write(tmp_path / "noise.csv", X, y)
    assert main(["train", "--data", str(data), "--target", "label", "--method", "static",
                 "--quick", "--hpc", "logistic", "--no-progress",
                 "--out", str(tmp_path / "bundle")]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if "not clearly better than always answering the majority class" in line]
    assert len(warnings) == 1 and "--hpc" in warnings[0]


def test_no_warning_when_the_hpc_is_clearly_better(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(3)
    X = rng.normal(size=(240, 4))
    y = (X.sum(axis=1) > 0).astype(int)  # every sensor helps: the cheapest policy knows less
    data = _write(tmp_path / "clear.csv", X, y)
    assert main(["train", "--data", str(data), "--target", "label", "--method", "static",
                 "--quick", "--hpc", "logistic", "--no-progress",
                 "--out", str(tmp_path / "bundle")]) == 0
    assert "warning: the HPC" not in capsys.readouterr().err
