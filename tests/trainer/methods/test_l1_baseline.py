"""The L1 baseline is L1 on every scikit-learn the project allows (issue 20 item 2)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from adaptedge.trainer.methods.baselines import L1Baseline, l1_path, l1_penalty


@pytest.mark.parametrize(("version", "expected"), [
    ("1.4.2", {"penalty": "l1"}), ("1.7.2", {"penalty": "l1"}),
    ("1.8.0", {"l1_ratio": 1.0}), ("1.9.1", {"l1_ratio": 1.0}), ("2.0.dev0", {"l1_ratio": 1.0}),
])
def test_l1_keywords_per_scikit_learn_version(version: str, expected: dict[str, object]) -> None:
    # before 1.8, l1_ratio without penalty="elasticnet" is ignored: an L2 model
    assert l1_penalty(version) == expected


def test_l1_baseline_selects_fewer_features_than_l2() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 20))
    y = (X[:, 0] + 0.8 * X[:, 1] + 0.3 * rng.normal(size=600) > 0).astype(np.int64)
    l2 = LogisticRegression(C=0.05, solver="saga", max_iter=3000).fit(X, y)
    assert int(np.sum(np.abs(l2.coef_) > 1e-8)) == 20  # an L2 model keeps every feature
    model = L1Baseline(C=0.05, random_state=0).fit(X, y)
    # 18 pure-noise features: an L1 penalty this strong drops most of them
    assert 2 <= len(model.columns_) <= 8
    assert {0, 1} <= set(model.columns_)


def _noisy_problem() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 12))
    y = (X[:, 0] - 0.7 * X[:, 3] + 0.4 * X[:, 5] + 0.5 * rng.normal(size=500) > 0)
    return X, y.astype(np.int64)


def test_a_warm_path_buys_the_sensors_cold_fits_buy() -> None:
    X, y = _noisy_problem()
    Cs = [0.003, 0.01, 0.03, 0.1, 1.0]
    path = l1_path([L1Baseline(C=c, random_state=0) for c in Cs], X, y)
    cold = [L1Baseline(C=c, random_state=0).fit(X, y) for c in Cs]
    assert [m.C for m in path] == Cs
    # a converged L1 problem has one solution: warm or cold, the same features are kept
    assert [m.columns_ for m in path] == [m.columns_ for m in cold]
    assert len(path[0].columns_) < len(path[-1].columns_)  # the path grows with C
    for warm, ref in zip(path, cold, strict=True):
        np.testing.assert_allclose(warm.coef_, ref.coef_, rtol=1e-3, atol=1e-4)


def test_a_path_takes_its_models_in_ascending_c() -> None:
    X, y = _noisy_problem()
    with pytest.raises(ValueError, match="ascending C"):
        l1_path([L1Baseline(C=0.1), L1Baseline(C=0.01)], X, y)
    assert l1_path([], X, y) == []
