"""Every gate/LPC estimator through the shared checks of ``tests/support/estimator_checks.py``.

Extend ``ESTIMATORS`` with ``(id, factory, data_fn)``: ``factory()`` returns an unfitted
estimator with a fixed seed, ``data_fn()`` a ``Data``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pytest

import tests.support.estimator_checks as checks
from adaptedge.trainer.data.synthetic import synthetic_2
from adaptedge.trainer.methods.adapt_gbrt import AdaptGbrtClassifier
from adaptedge.trainer.methods.adapt_lin import AdaptLinClassifier
from adaptedge.trainer.methods.baselines import ConfidenceCascade, GreedyMiser, L1Baseline
from tests.support.estimator_checks import Data


def _soft_oracle(y: np.ndarray, n_classes: int, seed: int) -> np.ndarray:
    """HPC-like probabilities: right with p=0.9 on 95% of rows, confidently wrong elsewhere."""
    rng = np.random.default_rng(seed)
    pred = np.where(rng.random(len(y)) < 0.95, y, (y + 1) % n_classes)
    P = np.full((len(y), n_classes), 0.1 / (n_classes - 1))
    P[np.arange(len(y)), pred] = 0.9
    return P


@cache
def letter_small() -> Data:
    """1500 training rows of letter-binary (16 unit-cost sensors) and 1000 test rows."""
    from adaptedge.trainer.data.datasets import load_dataset

    d = load_dataset("letter-binary")
    return Data(d.X_train[:1500], d.y_train[:1500], _soft_oracle(d.y_train[:1500], 2, 0),
                d.X_test[:1000])


@cache
def three_class() -> Data:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1200, 5)).astype(np.float32)
    y = (np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])).astype(np.int64)
    return Data(X[:800], y[:800], _soft_oracle(y[:800], 3, 1), X[800:])


@cache
def synth2() -> Data:
    d = synthetic_2(n=800)
    return Data(d.X_train, d.y_train, _soft_oracle(d.y_train, 2, 2), d.X_test)


SMALL = {"n_rounds": 2, "n_trees": 5, "max_depth": 3, "random_state": 0}
ESTIMATORS: list[tuple[str, Callable[[], Any], Callable[[], Data]]] = [
    ("adapt-gbrt", lambda: AdaptGbrtClassifier(p_full=0.3, gamma=1e-3, refine_rounds=1,
                                               margin_weight=0.5, **SMALL), letter_small),
    ("adapt-gbrt-3class", lambda: AdaptGbrtClassifier(p_full=0.3, gamma=1e-3, **SMALL),
     three_class),
    ("greedy-miser", lambda: GreedyMiser(gamma=1e-3, **SMALL), letter_small),
    ("confidence", lambda: ConfidenceCascade(k=3, threshold=0.8, **SMALL), letter_small),
    ("confidence-3class", lambda: ConfidenceCascade(k=2, threshold=0.6, **SMALL), three_class),
    ("l1", lambda: L1Baseline(C=0.05, threshold=0.3, random_state=0), letter_small),
    ("l1-3class", lambda: L1Baseline(C=0.05, threshold=0.3, random_state=0), three_class),
    ("adapt-lin", lambda: AdaptLinClassifier(p_full=0.5, gamma=0.01, n_rounds=3, n_steps=60),
     synth2),
    ("adapt-lin-3class", lambda: AdaptLinClassifier(p_full=0.3, gamma=0.003, n_rounds=2,
                                                    n_steps=60), three_class),
]
IDS = [e[0] for e in ESTIMATORS]


@cache
def _fitted(name: str) -> Any:
    _, factory, data = next(e for e in ESTIMATORS if e[0] == name)
    d = data()
    return factory().fit(d.X_train, d.y_train, d.hpc_train)


@pytest.mark.parametrize(("name", "factory", "data"), ESTIMATORS, ids=IDS)
def test_clone_params(name: str, factory: Callable[[], Any], data: Callable[[], Data]) -> None:
    checks.check_clone_params(factory())


@pytest.mark.parametrize(("name", "factory", "data"), ESTIMATORS, ids=IDS)
def test_not_fitted(name: str, factory: Callable[[], Any], data: Callable[[], Data]) -> None:
    checks.check_not_fitted(factory(), data())


@pytest.mark.parametrize(("name", "factory", "data"), ESTIMATORS, ids=IDS)
def test_refit_identical(name: str, factory: Callable[[], Any],
                         data: Callable[[], Data]) -> None:
    checks.check_refit_identical(factory, data())


@pytest.mark.parametrize(("name", "factory", "data"), ESTIMATORS, ids=IDS)
def test_pickle(name: str, factory: Callable[[], Any], data: Callable[[], Data]) -> None:
    checks.check_pickle(_fitted(name), data())


@pytest.mark.parametrize(("name", "factory", "data"), ESTIMATORS, ids=IDS)
def test_onnx_parity(name: str, factory: Callable[[], Any], data: Callable[[], Data]) -> None:
    checks.check_onnx_parity(_fitted(name), data())
