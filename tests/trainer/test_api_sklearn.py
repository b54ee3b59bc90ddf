"""Issue 21 item 9: scikit-learn conventions. ``fit(X, y)`` works on every estimator (ADAPT
takes its HPC as the ``hpc=`` parameter and fits its out-of-fold probabilities inside), so
each runs in a ``Pipeline``, ``cross_val_score`` and ``GridSearchCV``; ``train_bundle`` takes
arrays and DataFrames as well as paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from adaptedge.trainer.methods.adapt_gbrt import AdaptGbrtClassifier
from adaptedge.trainer.methods.adapt_lin import AdaptLinClassifier
from adaptedge.trainer.methods.baselines import ConfidenceCascade, GreedyMiser, L1Baseline


def data(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(np.int64)
    return X, y


LAYOUT: dict[str, Any] = {"feature_sensor": [0, 1, 2, 3], "sensor_costs": [1.0, 1.0, 1.0, 1.0],
                          "random_state": 0}
FAST_HPC = LogisticRegression()
ESTIMATORS = [
    AdaptGbrtClassifier(n_rounds=2, n_trees=4, **LAYOUT, hpc=FAST_HPC),
    AdaptLinClassifier(n_rounds=2, n_steps=40, sensor_starts=0, **LAYOUT, hpc=FAST_HPC),
    GreedyMiser(n_rounds=2, n_trees=4, **LAYOUT),
    ConfidenceCascade(k=2, n_rounds=2, n_trees=4, **LAYOUT),
    L1Baseline(**LAYOUT),
]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_every_estimator_in_a_pipeline_and_cross_val_score(estimator: Any) -> None:
    X, y = data()
    pipe = make_pipeline(StandardScaler(), estimator)
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,) and scores.mean() > 0.7, scores
    fitted = pipe.fit(X, y)
    assert fitted.score(X, y) > 0.7


@pytest.mark.slow
def test_dag_classifier_follows_the_conventions() -> None:
    """The DAG method as an estimator: labels of any kind, Pipeline, cross_val_score, clone,
    NaN cells as unmeasured sensors, and what its decisions cost."""
    from sklearn.base import clone

    from adaptedge.trainer import DagClassifier

    X, y = data(n=240)
    est = DagClassifier(quick=True, lam=0.05, escalation_price=1.0, hpc=FAST_HPC, **LAYOUT)
    scores = cross_val_score(make_pipeline(StandardScaler(), est), X, np.where(y, "yes", "no"),
                             cv=2, error_score="raise")
    assert scores.shape == (2,) and scores.mean() > 0.7, scores
    fitted = clone(est).fit(X, np.where(y == 1, 7, 3))
    assert list(fitted.classes_) == [3, 7] and set(fitted.predict(X)) <= {3, 7}
    assert fitted.predict_proba(X).shape == (len(X), 2)
    cost = fitted.decision_cost(X)
    read = fitted.sensors_used_
    assert read.dtype == bool and read.any() and cost.shape == (len(X),)
    assert 0 < cost.mean() <= 4 + 1e-9 and fitted.validation_.cost >= 0
    escalated = fitted.escalate(X)  # pays every sensor (the HPC's) and the free link
    assert np.allclose(cost[escalated], 4.0) and (cost[~escalated] <= 4.0).all()
    Xn = X.copy()
    Xn[np.random.default_rng(1).random(X.shape) < 0.05] = np.nan
    nan_fit = DagClassifier(quick=True, **LAYOUT).fit(Xn, y)  # hpc="auto" learns NaN too
    assert nan_fit.score(Xn, y) > 0.7 and np.isfinite(nan_fit.decision_cost(Xn)).all()
    with pytest.raises(ValueError, match="infinite"):
        DagClassifier(quick=True).fit(np.where(np.isnan(Xn), np.inf, Xn), y)


def test_adapt_in_grid_search_with_its_hpc_parameter() -> None:
    X, y = data()
    grid = GridSearchCV(AdaptGbrtClassifier(n_rounds=2, n_trees=4, **LAYOUT, hpc=FAST_HPC),
                        {"p_full": [0.1, 0.3]}, cv=2)
    grid.fit(X, y)
    assert grid.best_params_["p_full"] in (0.1, 0.3)
    assert "hpc" in AdaptGbrtClassifier().get_params()
    with pytest.raises(ValueError, match="hpc"):
        AdaptLinClassifier(hpc="forest").fit(X, y)


def test_default_hpc_is_fitted_out_of_fold_inside() -> None:
    X, y = data(n=150)
    est = AdaptGbrtClassifier(n_rounds=2, n_trees=4, **LAYOUT)  # hpc="auto": gradient boosting
    assert est.get_params()["hpc"] == "auto"
    assert est.fit(X, y).score(X, y) > 0.7


def test_given_probabilities_still_win() -> None:
    X, y = data()
    P = np.column_stack([1 - y, y]).astype(np.float64) * 0.8 + 0.1
    a = AdaptGbrtClassifier(n_rounds=2, n_trees=4, **LAYOUT).fit(X, y, P)
    b = AdaptGbrtClassifier(n_rounds=2, n_trees=4, **LAYOUT).fit(X, y, P)
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))


@pytest.mark.slow
def test_train_bundle_takes_arrays(tmp_path: Path) -> None:
    from adaptedge.protocol.bundle import verify
    from adaptedge.trainer.api import train_bundle
    from adaptedge.trainer.data.datasets import DatasetError

    X, y = data(n=400)
    labels = np.where(y == 1, "yes", "no")
    manifest = train_bundle((X, labels), "confidence", tmp_path / "b", quick=True,
                            progress=False)
    assert manifest.feature_names == ("x0", "x1", "x2", "x3")
    assert manifest.classes == ("no", "yes") and manifest.metadata["dataset"] == "arrays"
    assert verify(tmp_path / "b").bundle_id == manifest.bundle_id
    X[5, 2] = np.nan  # missing values: the CSV rule, naming column and row
    with pytest.raises(DatasetError, match="column 'x2' row 6"):
        train_bundle((X, labels), "confidence", tmp_path / "c", quick=True, progress=False)


@pytest.mark.slow
def test_train_bundle_takes_a_dataframe(tmp_path: Path) -> None:
    import pandas as pd  # a dev dependency: the DataFrame path always runs

    from adaptedge.trainer.api import train_bundle

    X, y = data(n=400)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"]).assign(label=y)
    manifest = train_bundle(frame, "confidence", tmp_path / "b", target="label", quick=True,
                            progress=False)
    assert manifest.feature_names == ("a", "b", "c", "d")
