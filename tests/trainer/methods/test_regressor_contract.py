"""The scikit-learn estimator contract for the regressors: clone keeps the parameters, refitting
gives the same predictions, a pickled model predicts the same, and both are regressors."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sklearn.base import clone, is_regressor

from adaptedge.trainer.data.synthetic_regression import regression_quadrants
from adaptedge.trainer.methods.cstc.regressor import CSTCRegressor
from adaptedge.trainer.methods.greedy_miser_regression import GreedyMiserRegressor

COSTS = [1.0, 1.0, 10.0, 10.0, 10.0, 10.0]
GROUPS = [(i,) for i in range(6)]


@pytest.mark.parametrize("make", [
    lambda: CSTCRegressor(groups=GROUPS, costs=COSTS, lam=0.3, random_state=1),
    lambda: GreedyMiserRegressor(gamma=0.01, n_trees=15, feature_sensor=list(range(6)),
                                 sensor_costs=COSTS, random_state=1),
])
def test_clone_refit_and_pickle(make: Callable[[], Any]) -> None:
    estimator = make()
    assert is_regressor(estimator)
    copy = clone(estimator)
    assert copy.get_params() == estimator.get_params()
    d = regression_quadrants(n=400, seed=3)
    X, y = d.X_train, d.targets("train")
    first = estimator.fit(X, y).predict(d.X_test)
    np.testing.assert_array_equal(copy.fit(X, y).predict(d.X_test), first)
    again = pickle.loads(pickle.dumps(estimator))
    np.testing.assert_array_equal(again.predict(d.X_test), first)
