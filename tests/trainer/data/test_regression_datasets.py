"""Regression datasets: the built-in ``gas-concentration`` (ppmv target, the gas dataset's
split) and CSV files with ``task="regression"`` (numeric target, refusals in one line)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.trainer.data.dataset_core import NO_CLASS
from adaptedge.trainer.data.datasets import DatasetError, list_datasets, load_dataset


def test_gas_concentration_is_the_gas_split_with_ppmv_targets() -> None:
    reg = load_dataset("gas-concentration", seed=1)
    gas = load_dataset("gas", seed=1)
    assert reg.is_regression and reg.task == "regression" and not gas.is_regression
    assert reg.classes == () and reg.target_name == "concentration" and reg.target_unit == "ppmv"
    assert reg.sensors == gas.sensors and reg.cost_weights == gas.cost_weights
    for split in ("train", "validation", "test"):
        X, y = reg.split(split)
        np.testing.assert_array_equal(X, gas.split(split)[0])
        assert (y == NO_CLASS).all()
        v = reg.targets(split)
        assert v.dtype == np.float64 and v.shape == (len(X),) and np.isfinite(v).all()
    every = np.concatenate([reg.targets(s) for s in ("train", "validation", "test")])
    assert every.min() > 0 and every.max() <= 1000  # ppmv, as in the UCI description
    assert "gas-concentration" in list_datasets()


def test_gas_concentration_first_reading_is_the_files_second_column() -> None:
    reg = load_dataset("gas-concentration", seed=0)
    # batch1.dat's first row is "Ethanol,10.000000,15596.162100,..." and lands in some split
    for split in ("train", "validation", "test"):
        X, _ = reg.split(split)
        hit = np.flatnonzero(np.isclose(X[:, 0], 15596.1621))
        if hit.size:
            assert reg.targets(split)[hit[0]] == 10.0
            return
    pytest.fail("the first reading of batch 1 is in no split")


def test_task_must_match_a_builtin() -> None:
    with pytest.raises(DatasetError, match=r"not a regression dataset.*gas-concentration"):
        load_dataset("heart", task="regression")
    with pytest.raises(DatasetError, match="not a classification dataset"):
        load_dataset("gas-concentration", task="classification")
    with pytest.raises(DatasetError, match="no numeric target"):
        load_dataset("heart").targets("train")


def _csv(tmp_path: Path, target_cells: list[str]) -> Path:
    rng = np.random.default_rng(0)
    lines = ["a,b,y"] + [f"{rng.normal():.4f},{rng.normal():.4f},{t}" for t in target_cells]
    path = tmp_path / "r.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_csv_regression_reads_a_numeric_target(tmp_path: Path) -> None:
    cells = [f"{0.5 * i:.1f}" for i in range(50)]
    d = load_dataset(str(_csv(tmp_path, cells)), target="y", task="regression", seed=3)
    assert d.is_regression and d.target_name == "y" and d.target_unit == ""
    sizes = [len(d.targets(s)) for s in ("train", "validation", "test")]
    assert sizes == [30, 10, 10]
    got = sorted(np.concatenate([d.targets(s) for s in ("train", "validation", "test")]))
    assert got == [0.5 * i for i in range(50)]
    assert "regression target 'y'" in d.description


def test_csv_regression_refuses_a_non_numeric_target_in_one_line(tmp_path: Path) -> None:
    path = _csv(tmp_path, ["1.0", "2.5", "high", "3.0"])
    with pytest.raises(DatasetError, match=r"numeric target.*'high' on row 4") as info:
        load_dataset(str(path), target="y", task="regression")
    assert "\n" not in str(info.value)
    # without --task regression the same file is a classification with classes
    assert load_dataset(str(path), target="y").classes == ("1.0", "2.5", "3.0", "high")
