"""Greedy Miser on squared loss: the cost penalty buys fewer sensors as gamma grows, the kept
iteration is the best on validation, predictions are in the data's units, and the ONNX stop
node's ``value`` equals ``predict`` to float32 precision on the node's own columns."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from adaptedge.trainer.data.dataset_core import Dataset
from adaptedge.trainer.data.synthetic_regression import regression_quadrants
from adaptedge.trainer.export.run import run_onnx
from adaptedge.trainer.methods.greedy_miser_regression import GreedyMiserRegressor

COSTS = [1.0, 1.0, 10.0, 10.0, 10.0, 10.0]


def _fit(gamma: float, seed: int = 0) -> tuple[GreedyMiserRegressor, Dataset]:
    d = regression_quadrants(n=800, seed=seed)
    model = GreedyMiserRegressor(gamma=gamma, n_trees=60, learning_rate=0.3,
                                 feature_sensor=list(range(6)), sensor_costs=COSTS)
    return model.fit(d.X_train, d.targets("train")), d


def test_cost_penalty_buys_fewer_sensors() -> None:
    free, d = _fit(0.0)
    miser, _ = _fit(0.05)
    assert miser.sensors_bought_.sum() < free.sensors_bought_.sum()
    assert set(np.flatnonzero(miser.sensors_bought_)) <= {0, 1}  # the expensive ones cost 10
    y = d.targets("test")
    X = d.X_test
    assert float(np.mean((free.predict(X) - y) ** 2)) < float(np.mean((miser.predict(X) - y) ** 2))


def test_best_iteration_is_the_lowest_validation_mse() -> None:
    model, d = _fit(0.0)
    X_val, y_val = d.X_val, d.targets("validation")
    staged = model.staged_mse(X_val, y_val)
    best = model.at_best_iteration(X_val, y_val)
    assert best.best_iteration_ == int(np.argmin(staged)) + 1
    assert float(np.mean((best.predict(X_val) - y_val) ** 2)) == pytest.approx(staged.min())
    assert len(model.trees_) == 60  # the original is untouched


def test_onnx_value_matches_predict_on_the_node_columns() -> None:
    model, d = _fit(0.0)
    X = d.X_test
    cols = list(model.features_used_)
    value = run_onnx(model.to_onnx(cols), X[:, cols], "value")
    assert value.shape == (len(X), 1)
    np.testing.assert_allclose(value[:, 0], model.predict(X), rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="not given"):
        model.to_onnx(cols[:-1])


def test_refusals() -> None:
    with pytest.raises(NotFittedError):
        GreedyMiserRegressor().predict(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="finite targets"):
        GreedyMiserRegressor().fit(np.zeros((3, 2)), [1.0, np.nan, 2.0])
