"""Baselines: Greedy Miser has no gate, the cascade reads k sensors, L1 selects sensors."""

from __future__ import annotations

import numpy as np

from adaptedge.trainer.data.synthetic import synthetic_2
from adaptedge.trainer.export.run import run_node
from adaptedge.trainer.methods.baselines import ConfidenceCascade, GreedyMiser, L1Baseline


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1500, 6)).astype(np.float32)
    y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(np.int64)
    return X, y


def test_greedy_miser_is_stop_only_and_cost_aware() -> None:
    X, y = _data()
    cheap = GreedyMiser(gamma=0.0, n_rounds=2, n_trees=5, random_state=0).fit(X, y)
    stingy = GreedyMiser(gamma=5e-3, n_rounds=2, n_trees=5, random_state=0).fit(X, y)
    assert stingy.sensors_bought_.sum() < cheap.sensors_bought_.sum()
    assert stingy.sensors_bought_[0]
    out = run_node(stingy.to_onnx(), X[:, list(stingy.node_columns())])
    assert set(out) == {"probabilities"}


def test_confidence_cascade_reads_at_most_k_sensors_and_escalates_unsure() -> None:
    X, y = _data()
    model = ConfidenceCascade(k=2, threshold=0.9, n_rounds=2, n_trees=5).fit(X, y)
    assert model.sensors_bought_.sum() <= 2 and model.sensors_bought_[0]
    proba = model.predict_proba(X)
    escalate = model.escalate(X)
    assert np.all(proba[escalate].max(axis=1) < 0.9 + 1e-6)
    assert np.all(proba[~escalate].max(axis=1) >= 0.9 - 1e-6)


def test_l1_baseline_picks_x1_on_synthetic_2() -> None:
    d = synthetic_2(n=800)
    picks = [L1Baseline(C=c, random_state=0).fit(d.X_train, d.y_train).sensors_bought_
             for c in np.geomspace(1e-3, 1, 16)]
    first = next(p for p in picks if p.any())
    assert first.tolist() == [True, False]
