"""ADAPT-LIN unit tests: group sparsity over sensors, the Synthetic-2 optimum, multi-class."""

from __future__ import annotations

import time

import numpy as np

from adaptedge.trainer.data.synthetic import synthetic_2
from adaptedge.trainer.methods.adapt_lin import AdaptLinClassifier


def _hpc(y: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.eye(2)[y] * 0.98 + 0.01
    return out


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


def test_synthetic_2_finds_the_x2_only_system() -> None:
    """Paper §5 (Fig. 3): reading x2 only, g escalates clusters 1–2 and f1 separates 3 from
    4 (cost 1.5), where the L1 baseline and the all-sensor start stop at x1."""
    d = synthetic_2(n=800)
    started = time.perf_counter()
    model = AdaptLinClassifier(p_full=0.5, gamma=0.01, n_rounds=6, n_steps=100).fit(
        d.X_train, d.y_train, _hpc(d.y_train))
    assert time.perf_counter() - started < 10.0
    assert model.sensors_bought_.tolist() == [False, True]
    assert model.columns_ == (1,)
    X = np.vstack([d.X_val, d.X_test])
    y = np.concatenate([d.y_val, d.y_test])
    escalate = model.escalate(X)
    lower_band = X[:, 1] < 1.25  # clusters 1 and 2 (x2 = ±0.5); clusters 3, 4 sit at 2 and 4
    assert np.mean(escalate == lower_band) >= 0.99
    # the true labels are the HPC here: escalated rows are answered correctly
    accuracy = np.mean(np.where(escalate, True, model.predict(X) == y))
    assert accuracy >= 0.99
    # the start was chosen by the training objective, not by luck of the first start
    values = {label: value for label, value, _ in model.starts_}
    assert model.objective_ == min(values.values())
    assert values["zeros"] > model.objective_


def test_sensor_starts_can_be_turned_off() -> None:
    d = synthetic_2(n=400)
    model = AdaptLinClassifier(p_full=0.5, gamma=0.01, n_rounds=2, n_steps=20,
                               sensor_starts=0).fit(d.X_train, d.y_train, _hpc(d.y_train))
    assert [label for label, _, _ in model.starts_] == ["zeros"]
