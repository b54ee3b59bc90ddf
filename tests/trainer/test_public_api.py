"""The trainer's public API: every estimator class of ``trainer.methods`` is importable from
``adaptedge.trainer`` and listed in ``__all__``; estimators take string and integer labels."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score

import adaptedge.trainer as trainer
import adaptedge.trainer.methods as methods


def _estimator_classes() -> set[str]:
    names = set()
    for info in pkgutil.walk_packages(methods.__path__, prefix=f"{methods.__name__}."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseEstimator)
                    and obj.__module__ == module.__name__ and not name.startswith("_")):
                names.add(name)
    return names


def test_every_estimator_and_train_bundle_are_public() -> None:
    classes = _estimator_classes()
    assert "AdaptGbrtClassifier" in classes and "CSTCClassifier" in classes
    assert classes <= set(trainer.__all__), sorted(classes - set(trainer.__all__))
    for name in trainer.__all__:
        assert getattr(trainer, name) is not None
    from adaptedge.trainer import AdaptGbrtClassifier, DagClassifier, train_bundle

    assert "DagClassifier" in classes and DagClassifier.__module__.endswith("dag.estimator")

    assert AdaptGbrtClassifier.__name__ == "AdaptGbrtClassifier" and callable(train_bundle)
    with pytest.raises(AttributeError, match="public names"):
        trainer.NoSuchEstimator  # noqa: B018


LAYOUT = {"feature_sensor": [0, 1, 2, 3], "sensor_costs": [1.0, 1.0, 1.0, 1.0],
          "random_state": 0}


@pytest.mark.parametrize("make", [
    lambda: trainer.AdaptGbrtClassifier(n_rounds=2, n_trees=4, **LAYOUT, hpc=LogisticRegression()),
    lambda: trainer.AdaptLinClassifier(n_rounds=2, n_steps=40, sensor_starts=0, **LAYOUT,
                                       hpc=LogisticRegression()),
    lambda: trainer.GreedyMiser(n_rounds=2, n_trees=4, **LAYOUT),
    lambda: trainer.ConfidenceCascade(k=2, n_rounds=2, n_trees=4, **LAYOUT),
    lambda: trainer.L1Baseline(**LAYOUT),
], ids=["adapt-gbrt", "adapt-lin", "greedy-miser", "confidence", "l1"])
def test_string_and_integer_labels(make: object) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 4)).astype(np.float32)
    positive = X[:, 0] + 0.5 * X[:, 1] > 0
    for y in (np.where(positive, "yes", "no"), np.where(positive, 7, 3)):
        scores = cross_val_score(make(), X, y, cv=3, error_score="raise")  # type: ignore[operator]
        assert scores.mean() > 0.8, scores
        fitted = make().fit(X, y)  # type: ignore[operator]
        assert set(fitted.predict(X)) <= set(y) and list(fitted.classes_) == sorted(set(y))
