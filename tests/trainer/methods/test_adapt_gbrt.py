"""ADAPT-GBRT unit tests: the q-step, the shared bought set, the cost penalty, multi-class."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.trainer.methods.adapt_gbrt import AdaptGbrtClassifier
from adaptedge.trainer.methods.cart import BinMapper, TreeParams, grow_tree
from adaptedge.trainer.methods.gating import q_step


@pytest.mark.parametrize("p_full", [0.05, 0.2, 0.5])
def test_q_step_meets_p_full_exactly(p_full: float) -> None:
    excess = np.random.default_rng(0).normal(2.0, 3.0, size=5000)  # unconstrained mean q > 0.6
    q, beta = q_step(excess, p_full)
    assert beta > 0
    assert abs(q.mean() - p_full) < 1e-8
    assert np.all((q >= 0) & (q <= 1))


def test_q_step_slack_constraint_keeps_beta_zero_and_p0_sends_nothing() -> None:
    excess = np.full(100, -5.0)
    q, beta = q_step(excess, 0.5)
    assert beta == 0.0 and q.mean() < 0.5
    q0, _ = q_step(excess + 10, 0.0)
    assert not q0.any()


def _two_feature_problem(n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, 2)).astype(np.float32)
    y = ((X[:, 0] > 0) ^ (X[:, 1] > 0.8)).astype(np.int64)
    return X, y


def test_sensor_bought_by_one_tree_is_free_for_the_next() -> None:
    X, y = _two_feature_problem()
    binner = BinMapper.fit(X)
    codes = binner.transform(X)
    r = (y - 0.5)[:, None].astype(np.float64)
    h = np.full_like(r, 0.25)
    params = TreeParams(max_depth=2, gamma=10.0)  # far above any split gain
    cost, sensor = np.ones(2), np.arange(2)
    nothing = np.zeros(2, dtype=bool)
    tree = grow_tree(codes, binner, r, h, params, cost, sensor, nothing)[0]
    assert tree.features_used == frozenset() and not nothing.any()
    bought = np.array([False, True])  # e.g. bought by the gate's trees
    tree = grow_tree(codes, binner, r, h, params, cost, sensor, bought)[0]
    assert tree.features_used == frozenset({1})
    assert bought.tolist() == [False, True]


def test_gate_and_lpc_share_one_bought_set() -> None:
    X, y = _two_feature_problem()
    P = np.eye(2)[y] * 0.9 + 0.05
    model = AdaptGbrtClassifier(p_full=0.3, gamma=1e-3, n_rounds=3, n_trees=5,
                                random_state=0).fit(X, y, P)
    used = set(model.features_used_)
    assert used and set(np.flatnonzero(model.sensors_bought_)) == used
    assert list(model.node_columns()) == sorted(used)


def test_infinite_gamma_buys_nothing() -> None:
    X, y = _two_feature_problem()
    P = np.eye(2)[y] * 0.9 + 0.05
    model = AdaptGbrtClassifier(p_full=0.3, gamma=float("inf"), n_rounds=2, n_trees=3,
                                random_state=0).fit(X, y, P)
    assert not model.sensors_bought_.any()
    assert model.features_used_ == ()


def test_multiclass_softmax_lpc_learns() -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1500, 3)).astype(np.float32)
    y = np.digitize(X[:, 0], [-0.6, 0.6]).astype(np.int64)
    P = np.eye(3)[y] * 0.9 + 0.1 / 3
    model = AdaptGbrtClassifier(p_full=0.1, gamma=0.0, n_rounds=3, n_trees=10,
                                random_state=0).fit(X, y, P)
    proba = model.predict_proba(X)
    assert proba.shape == (1500, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    assert np.mean(model.predict(X) == y) > 0.9
    assert 0 in model.features_used_


def test_invalid_parameters_are_named() -> None:
    X, y = _two_feature_problem(100)
    with pytest.raises(ValueError, match="p_full"):
        AdaptGbrtClassifier(p_full=1.5).fit(X, y, np.full((100, 2), 0.5))
    with pytest.raises(ValueError, match="hpc_proba"):
        AdaptGbrtClassifier().fit(X, y, np.full((99, 2), 0.5))


def test_initial_sensors_are_free_and_only_used_ones_are_read() -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2000, 4)).astype(np.float32)
    y = ((X[:, 0] > 0) ^ (X[:, 1] > 0.8)).astype(np.int64)
    P = np.eye(2)[y] * 0.9 + 0.05
    params = dict(p_full=0.2, n_rounds=2, n_trees=4, random_state=0)
    # a gamma so high that nothing is worth buying: only the initial sensors can be used
    priced_out = AdaptGbrtClassifier(gamma=1e3, **params).fit(X, y, P)
    assert not priced_out.sensors_bought_.any()
    warm = AdaptGbrtClassifier(gamma=1e3, initial_sensors=[0, 1, 3], **params).fit(X, y, P)
    assert set(warm.features_used_) <= {0, 1, 3}
    assert warm.sensors_bought_[[0, 1]].all() and not warm.sensors_bought_[2]
    # sensor 3 is noise: bought up front but never split on, so the device does not read it
    assert not warm.sensors_bought_[3] or 3 in warm.features_used_
    assert list(warm.node_columns()) == sorted(warm.features_used_)
    assert np.mean(warm.predict(X) == y) > 0.9


def test_initial_sensors_out_of_range_is_named() -> None:
    X, y = _two_feature_problem(100)
    with pytest.raises(ValueError, match="initial_sensors"):
        AdaptGbrtClassifier(initial_sensors=[5]).fit(X, y, np.full((100, 2), 0.5))


@pytest.mark.parametrize("n_out", [1, 3])
def test_grown_tree_fits_like_a_brute_force_search_and_predicts_its_fitted_values(
        n_out: int) -> None:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(600, 5)).astype(np.float32)
    X[:, 1] = np.round(X[:, 1])  # a few distinct values
    r = rng.normal(size=(600, n_out)) + X[:, [2]]  # feature 2 explains most
    binner = BinMapper.fit(X, 16)
    codes = binner.transform(X)
    allowed = np.array([True, True, True, False, True])
    params = TreeParams(max_depth=3, min_samples_leaf=10)
    tree, fitted = grow_tree(codes, binner, r, np.ones_like(r), params, np.zeros(5),
                             np.arange(5), np.zeros(5, dtype=bool), allowed)
    np.testing.assert_array_equal(fitted, tree.predict(X))
    assert 3 not in tree.features_used
    best = (-np.inf, -1, -1)  # the root split by direct sums over every (feature, threshold)
    for j in np.flatnonzero(allowed):
        for b, thr in enumerate(binner.thresholds[j]):
            left = X[:, j] <= thr
            if min(left.sum(), (~left).sum()) < params.min_samples_leaf:
                continue
            gain = ((r[left].sum(0) ** 2).sum() / left.sum()
                    + (r[~left].sum(0) ** 2).sum() / (~left).sum())
            best = max(best, (gain, j, b))
    assert (tree.feature[0], tree.threshold[0]) == (best[1], binner.thresholds[best[1]][best[2]])


def test_bins_ignore_missing_values_in_a_many_valued_feature() -> None:
    rng = np.random.default_rng(0)
    column = rng.normal(size=1000).astype(np.float32)
    column[::7] = np.nan  # missing readings among more distinct values than bins
    binner = BinMapper.fit(column[:, None], max_bins=16)
    thresholds = binner.thresholds[0]
    assert 2 <= thresholds.size <= 15 and np.isfinite(thresholds).all()
    finite = column[np.isfinite(column)]
    assert thresholds.min() >= finite.min() and thresholds.max() < finite.max()
    codes = binner.transform(column[:, None])[:, 0]
    assert codes[np.isnan(column)].tolist() == [thresholds.size] * int(np.isnan(column).sum())
