"""The regression HPC: fitted on train only, validation error reported, ONNX ``value`` [N, 1]
matching scikit-learn to float32 precision (extra-trees and histogram gradient boosting)."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.trainer.data.synthetic_regression import regression_quadrants
from adaptedge.trainer.errors import HpcError
from adaptedge.trainer.export.run import run_onnx
from adaptedge.trainer.regression_hpc import fit_regression_hpc, regressor_to_onnx


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["extra-trees", "hgb"])
def test_onnx_value_matches_sklearn(kind: str) -> None:
    d = regression_quadrants(n=400, seed=1)
    hpc = fit_regression_hpc(d, kind, seed=1)
    value = run_onnx(hpc.onnx_bytes(), d.X_test, "value")
    assert value.shape == (len(d.X_test), 1) and value.dtype == np.float32
    np.testing.assert_allclose(value[:, 0], hpc.values_test, rtol=1e-5, atol=1e-4)
    err = hpc.values_val - d.targets("validation")
    assert hpc.val_mse == pytest.approx(float(np.mean(err ** 2)))
    assert hpc.val_mae == pytest.approx(float(np.mean(np.abs(err))))
    assert hpc.sensors == tuple(s.name for s in d.sensors)


@pytest.mark.slow
def test_out_of_fold_values_differ_from_in_sample() -> None:
    d = regression_quadrants(n=300, seed=2)
    hpc = fit_regression_hpc(d, seed=2, oof=True)
    assert hpc.oof_train is not None and hpc.oof_train.shape == (len(d.X_train),)
    in_sample = hpc.predict(d.X_train)
    assert float(np.mean((in_sample - d.targets("train")) ** 2)) < \
        float(np.mean((hpc.oof_train - d.targets("train")) ** 2))


def test_refuses_unknown_kinds_and_models() -> None:
    d = regression_quadrants(n=100, seed=0)
    with pytest.raises(HpcError, match="extra-trees"):
        fit_regression_hpc(d, "logistic")
    from sklearn.linear_model import LinearRegression

    with pytest.raises(HpcError, match="cannot export LinearRegression"):
        regressor_to_onnx(LinearRegression().fit(d.X_train, d.targets("train")), 6)
