"""ADAPT-LIN unit tests: group sparsity over sensors, infinite gamma, multi-class."""

from __future__ import annotations

import numpy as np

from trainer.adapt_lin import AdaptLinClassifier
from trainer.synthetic import synthetic_2


def _hpc(y: np.ndarray) -> np.ndarray:
    return np.eye(2)[y] * 0.98 + 0.01


def test_group_penalty_drops_whole_sensors() -> None:
    d = synthetic_2(n=800)
    dense = AdaptLinClassifier(p_full=0.5, gamma=0.0, n_rounds=3, n_steps=80).fit(
        d.X_train, d.y_train, _hpc(d.y_train))
    sparse = AdaptLinClassifier(p_full=0.5, gamma=0.3, n_rounds=3, n_steps=80).fit(
        d.X_train, d.y_train, _hpc(d.y_train))
    assert dense.sensors_bought_.all()
    assert sparse.sensors_bought_.sum() < 2
    assert sparse.coef_.shape[0] == len(sparse.columns_)


def test_q_respects_p_full() -> None:
    d = synthetic_2(n=800)
    model = AdaptLinClassifier(p_full=0.25, gamma=0.01, n_rounds=2, n_steps=50).fit(
        d.X_train, d.y_train, _hpc(d.y_train))
    assert model.q_train_.mean() <= 0.25 + 1e-8


def test_multiclass() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 4)).astype(np.float32)
    y = np.digitize(X[:, 1], [-0.5, 0.5]).astype(np.int64)
    model = AdaptLinClassifier(p_full=0.1, gamma=0.001, n_rounds=2, n_steps=150).fit(
        X, y, np.eye(3)[y] * 0.9 + 0.1 / 3)
    assert model.predict_proba(X).shape == (900, 3)
    assert np.mean(model.predict(X) == y) > 0.8
    assert model.sensors_bought_[1]
