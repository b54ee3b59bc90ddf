"""``cart.grow_tree`` against a straightforward reference: the same trees, bit for bit.

The reference chooses every node's split on its own (``_reference_choose`` per node, in order)
from histograms of each feature of each node taken on their own, with left sums cumulative
within the feature. The optimised grower histograms all nodes of a level in one pass, reads only
the allowed features (a refinement round's), batches the choice per level (re-choosing a node
when a left sibling bought a sensor) and hoists the per-tree constants; none of that may change
a single bit of a tree."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from adaptedge.trainer.methods import cart
from adaptedge.trainer.methods.cart import (
    BinMapper,
    BinnedRows,
    Tree,
    TreeParams,
    grow_tree,
    quantize,
)

Split = tuple[int, int, float] | None


def _layout(binner: BinMapper, allowed: NDArray[np.bool_] | None
            ) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.bool_]]:
    """Bin b of feature j at j·width + b (width: the most bins of any feature)."""
    n_bins = binner.n_bins
    width = int(n_bins.max())
    offsets = np.arange(n_bins.size) * width
    bin_feature = np.repeat(np.arange(n_bins.size), width)
    invalid = np.tile(np.arange(width), n_bins.size) >= (n_bins - 1)[bin_feature]
    if allowed is not None:
        invalid |= ~allowed[bin_feature]
    return offsets, bin_feature, invalid


def _reference_gains(codes: NDArray[np.uint8], residual: NDArray[np.float64],
                     idx: list[NDArray[np.intp]], binner: BinMapper, params: TreeParams,
                     invalid: NDArray[np.bool_]) -> list[tuple[NDArray[np.float64], NDArray[np.bool_]]]:
    """Every feature of every node histogrammed on its own (the optimised grower reads only
    the allowed features, all nodes of a level in one pass)."""
    n_total, d = codes.shape
    width, n_nodes, n_out = int(binner.n_bins.max()), len(idx), residual.shape[1]
    count = np.zeros((n_nodes, d, width))
    sums = np.zeros((n_nodes, d, width, n_out))
    for s, rows in enumerate(idx):
        for j in range(d):
            count[s, j] = np.bincount(codes[rows, j], minlength=width)
            for k in range(n_out):
                sums[s, j, :, k] = np.bincount(codes[rows, j], weights=residual[rows, k],
                                               minlength=width)
    left_sum = np.cumsum(sums, axis=2).reshape(n_nodes, d * width, n_out)
    left_n = np.cumsum(count, axis=2).reshape(n_nodes, d * width)
    total_sum = np.stack([residual[rows].sum(axis=0) for rows in idx])
    n_node = np.array([float(rows.size) for rows in idx])[:, None]
    right_sum, right_n = total_sum[:, None, :] - left_sum, n_node - left_n
    ok = (left_n >= params.min_samples_leaf) & (right_n >= params.min_samples_leaf) & ~invalid
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = ((left_sum**2).sum(axis=2) / left_n + (right_sum**2).sum(axis=2) / right_n
                - (total_sum**2).sum(axis=1)[:, None] / n_node)
    gain = 0.5 * gain / n_total
    return [(gain[s], ok[s]) for s in range(n_nodes)]


def _reference_choose(gain: NDArray[np.float64], ok: NDArray[np.bool_], binner: BinMapper,
                      params: TreeParams, cost: NDArray[np.float64],
                      sensor: NDArray[np.intp], bought: NDArray[np.bool_]) -> Split:
    offsets, bin_feature, _ = _layout(binner, None)
    if not ok.any():
        return None
    charged = ~bought[sensor[bin_feature]] & (cost[bin_feature] > 0)
    with np.errstate(invalid="ignore"):
        penalty = np.where(charged, params.gamma * cost[bin_feature], 0.0)
        penalised = np.where(ok, gain - penalty, -np.inf)
    best = int(np.argmax(penalised))
    if not penalised[best] > 1e-12:
        return None
    j = int(bin_feature[best])
    return j, int(best - offsets[j]), float(gain[best])


def _reference_tree(codes: NDArray[np.uint8], binner: BinMapper, r: NDArray[np.float64],
                    h: NDArray[np.float64], params: TreeParams, cost: NDArray[np.float64],
                    sensor: NDArray[np.intp], bought: NDArray[np.bool_],
                    allowed: NDArray[np.bool_] | None) -> tuple[list[list[float]], NDArray[np.float64]]:
    """Node lists [feature, threshold, left, right, gain, *value] and the fitted values."""
    invalid = _layout(binner, allowed)[2]
    nodes: list[list[float]] = [[-1, 0.0, -1, -1, 0.0, *([0.0] * r.shape[1])]]
    level = [(0, np.arange(codes.shape[0]))]
    for _ in range(params.max_depth):
        active = [idx for _, idx in level if idx.size >= 2 * params.min_samples_leaf]
        if not active:
            break
        gains = _reference_gains(codes, r, active, binner, params, invalid)
        next_level = []
        for node, idx in level:
            split = None
            if idx.size >= 2 * params.min_samples_leaf:
                split = _reference_choose(*gains.pop(0), binner, params, cost, sensor, bought)
            if split is None:
                next_level.append((node, idx))
                continue
            j, b, gain = split
            go_left = codes[idx, j] <= b
            nodes += [[-1, 0.0, -1, -1, 0.0, *([0.0] * r.shape[1])] for _ in range(2)]
            nodes[node][:5] = [j, float(binner.thresholds[j][b]), len(nodes) - 2, len(nodes) - 1,
                               gain]
            bought[sensor[j]] = True
            next_level += [(len(nodes) - 2, idx[go_left]), (len(nodes) - 1, idx[~go_left])]
        level = next_level
    fitted = np.zeros(r.shape)
    for node, idx in level:
        if nodes[node][0] < 0:
            value = quantize(params.learning_rate * r[idx].sum(axis=0)
                             / (h[idx].sum(axis=0) + params.l2))
            nodes[node][5:] = list(value)
            fitted[idx] = value
    return nodes, fitted


def _as_lists(tree: Tree) -> list[list[float]]:
    assert tree.gain is not None
    return [[int(tree.feature[i]), float(tree.threshold[i]), int(tree.left[i]),
             int(tree.right[i]), float(tree.gain[i]), *map(float, tree.value[i])]
            for i in range(tree.feature.size)]


@pytest.fixture(params=["c", "numpy"])
def inner_loops(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The grower's inner loops: the histogram pass (``_tree_loops.fill``) and a node's rows
    split and summed (``_tree_loops``) in C, or numpy's bincount, masks and sums (the fallback
    of an install without a compiler); the trees must not differ by a bit."""
    names = ("_fill_histograms", "_split_rows", "_sum_rows")
    if request.param == "numpy":
        for name in names:
            monkeypatch.setattr(cart, name, None)
    elif any(getattr(cart, name) is None for name in names):
        pytest.skip("the C loops were not built (tests/trainer/methods/test_tree_loops.py)")
    return str(request.param)


@pytest.mark.parametrize("seed", range(6))
def test_grow_tree_equals_the_reference_bit_for_bit(seed: int, inner_loops: str) -> None:
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(300, 1500)), int(rng.integers(3, 9))
    X = rng.normal(size=(n, d)).astype(np.float32)
    X[:, 0] = np.round(X[:, 0] * 2)  # a few distinct values
    X[:, -1] = 1.0  # one bin: never splittable
    n_out = (1, 3, 11)[seed % 3]  # 11 outputs: sums over outputs in numpy's pairwise blocks
    r = rng.normal(size=(n, n_out)) + X[:, [1]] * rng.normal(size=n_out)
    h = rng.uniform(0.05, 0.3, size=(n, n_out))
    binner = BinMapper.fit(X, int(rng.integers(4, 40)))
    codes = binner.transform(X)
    rows = BinnedRows.of(codes, binner)
    sensor = rng.integers(0, max(2, d - 2), size=d).astype(np.intp)  # sensors of 1-2 features
    cost = rng.choice([0.0, 0.5, 1.0, 2.0], size=int(sensor.max()) + 1)[sensor]
    allowed = None if seed < 3 else rng.random(d) < 0.7
    bought_ref, bought = np.zeros(sensor.max() + 1, bool), np.zeros(sensor.max() + 1, bool)
    for t in range(6):  # a few boosting steps: the bought set grows between and within trees
        params = TreeParams(max_depth=int(rng.integers(2, 6)),
                            min_samples_leaf=int(rng.integers(3, 30)),
                            gamma=float(rng.choice([0.0, 1e-3, 1e-2, 5e-2])))
        nodes, fitted_ref = _reference_tree(codes, binner, r, h, params, cost, sensor,
                                            bought_ref, allowed)
        tree, fitted = grow_tree(codes, binner, r, h, params, cost, sensor, bought, allowed,
                                 rows if t % 2 else None)
        assert _as_lists(tree) == nodes
        assert np.array_equal(fitted, fitted_ref) and np.array_equal(bought, bought_ref)
        r = r - fitted


def test_a_sensor_bought_by_a_left_sibling_is_free_for_its_right_sibling() -> None:
    """Both children of the root want sensor 0; only the left one's gain pays its price, so
    the right one splits on it only because the left one bought it in the same level."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(2000, 3)).astype(np.float32)
    X[:, [0, 2]] = np.sign(X[:, [0, 2]])  # two-valued: the splits fall exactly at 0
    r = (np.where(X[:, 2] > 0, 10.0 + 0.5 * X[:, 0], -10.0 + 3.0 * X[:, 0])
         + 0.01 * rng.normal(size=2000))[:, None]
    binner = BinMapper.fit(X, 8)
    codes = binner.transform(X)
    sensor, cost = np.arange(3), np.array([1.0, 0.0, 0.0])
    params = TreeParams(max_depth=2, min_samples_leaf=10, gamma=0.5)
    bought_ref, bought = np.zeros(3, bool), np.zeros(3, bool)
    nodes, _ = _reference_tree(codes, binner, r, np.ones_like(r), params, cost, sensor,
                               bought_ref, None)
    tree, _ = grow_tree(codes, binner, r, np.ones_like(r), params, cost, sensor, bought)
    assert _as_lists(tree) == nodes
    assert tree.feature[:3].tolist() == [2, 0, 0] and bought.tolist() == [True, False, True]
