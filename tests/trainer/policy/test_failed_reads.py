"""Issue 37: NaN cells in training data are unmeasured sensors. adapt-gbrt and dag learn from
them; the bundle's metrics walk such rows as a device does (a failed read), so the trainer's
validation walk, the ONNX oracle and ``EdgeRuntime.predict_row`` agree row by row. Methods that
cannot learn them refuse in one line naming the method, unless ``impute="median"``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from adaptedge.trainer.api import train_bundle
from adaptedge.trainer.data.datasets import DatasetError, load_dataset
from adaptedge.trainer.data.splits import CERTIFY_KEY, certify_rows
from adaptedge.trainer.policy.failed_reads import failed_sensors, ranked
from adaptedge.trainer.policy.oracle import BundleRunner

MISSING_SHARE = 0.05


def nan_csv(path: Path, n: int = 500, d: int = 4, seed: int = 0) -> Path:
    """A two-class CSV whose features are each missing (empty cell) on ~5% of the rows."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.8 * X[:, 1] - 0.6 * X[:, 2] + 0.4 * rng.normal(size=n) > 0)
    hidden = rng.random(X.shape) < MISSING_SHARE
    lines = [",".join([f"f{j}" for j in range(d)] + ["label"])]
    for row, miss, t in zip(X, hidden, y, strict=True):
        cells = ["" if m else f"{v:.4f}" for v, m in zip(row, miss, strict=True)]
        lines.append(",".join([*cells, "yes" if t else "no"]))
    path.write_text("\n".join(lines) + "\n")
    return path


def edge_decisions(bundle: Path, point: str, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from adaptedge.edge import EdgeRuntime

    rt = EdgeRuntime.load(bundle, operating_point=point)
    try:
        decisions = [rt.predict_row(x) for x in X]
    finally:
        rt.close()
    return (np.array([d.escalated for d in decisions]),
            np.array([d.label_index for d in decisions]))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["adapt-gbrt", "dag"])
def test_nan_cells_train_and_walk_as_on_the_device(tmp_path: Path, method: str) -> None:
    data = nan_csv(tmp_path / "d.csv")
    out = tmp_path / "b"
    manifest = train_bundle(str(data), method, out, target="label", quick=True, progress=False)
    d = load_dataset(str(data), target="label", missing=True)
    assert np.isnan(d.X_val).any() and np.isnan(d.X_train).any()
    # the stored metrics are the selection rows' (the certify rows are held out of every choice)
    record = manifest.metadata[CERTIFY_KEY]
    select, _ = certify_rows(d.y_val, float(record["fraction"]), int(record["seed"]))
    d = replace(d, X_val=d.X_val[select], y_val=d.y_val[select])
    runner = BundleRunner.from_dir(out)
    failing = failed_sensors(d.X_val, [s.features for s in manifest.sensors]) != 0
    checked = 0
    for op in manifest.operating_points[:8]:
        result = runner.evaluate(op.policy, d.X_val, d.y_val)
        # the metrics stored (trainer's float64 walk) are the float32 device walk's
        assert result.accuracy == pytest.approx(op.accuracy, abs=1e-9), op.name
        assert result.mean_cost == pytest.approx(op.cost, rel=1e-6), op.name
        escalated, labels = edge_decisions(out, op.name, d.X_val)
        local = ~result.escalated
        assert np.array_equal(escalated, result.escalated), op.name
        assert np.array_equal(labels[local], result.labels[local]), op.name
        read_failed = (result.sensors_read & np.isnan(d.X_val)[:, [s.features[0] for s in
                                                                   manifest.sensors]]).any()
        assert not read_failed, "a walk read (and paid) a sensor that was not measured"
        checked += 1
    assert checked and failing.any()


def test_a_method_that_cannot_learn_nan_refuses_naming_it(tmp_path: Path) -> None:
    data = nan_csv(tmp_path / "d.csv", n=300)
    with pytest.raises(DatasetError, match=r"method 'adapt-lin' cannot learn from missing "
                                           r"values: .*column 'f\d' row \d+ is empty.*--impute"):
        train_bundle(str(data), "adapt-lin", tmp_path / "b", target="label", quick=True,
                     progress=False)
    manifest = train_bundle(str(data), "confidence", tmp_path / "c", target="label",
                            quick=True, progress=False, impute="median", hpc_kind="logistic")
    assert "imputed with their feature's training median" in str(
        manifest.metadata["dataset_description"])


@pytest.mark.slow
def test_the_hpc_learns_nan_or_refuses(tmp_path: Path) -> None:
    from adaptedge.trainer.hpc import HpcError, fit_hpc

    d = load_dataset(str(nan_csv(tmp_path / "d.csv", n=300)), target="label", missing=True)
    hpc = fit_hpc(d, cache=False)
    assert hpc.description.startswith("hgb") and np.isfinite(hpc.oof_proba_train).all()
    with pytest.raises(HpcError, match="'logistic' cannot learn from missing values"):
        fit_hpc(d, kind="logistic", cache=False)


def test_ranked_scores_fall_back_in_listed_order() -> None:
    scores = np.array([0.1, 0.5, 0.49995, -1.0])
    assert ranked(scores, 1e-4).tolist() == [0.0, 3.0, 2.0, 0.0]
    assert ranked(scores, 0.0).tolist() == scores.tolist()
