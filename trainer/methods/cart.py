"""Histogram regression trees with a cost-penalised split criterion (Greedy Miser / ADAPT-GBRT).

A tree is fitted to residuals (negative gradients) by squared loss, CART-style, on binned
features. A split on feature ``j`` scores

    gain = ½ · (G_L²/n_L + G_R²/n_R − G²/n) / N_total − γ · c(sensor(j)) · [sensor(j) not bought]

(summed over outputs for vector residuals), so the first use of a sensor must pay for itself.
The caller owns the ``bought`` mask: ADAPT-GBRT passes the same mask to the trees of the gate
and of the LPC, so a sensor bought by either is free for both. Within one tree a sensor is
charged once. Leaf values are Newton steps ``lr · Σr / (Σh + λ)`` quantised to multiples of
``LEAF_QUANTUM`` so that float32 sums in onnxruntime equal the float64 sums here bit for bit.

Thresholds are float32 and a sample goes left when ``x <= threshold`` (ONNX ``BRANCH_LEQ``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

LEAF_QUANTUM = 2.0**-16
"""Leaf values are multiples of this: float32 sums of such values are exact below 2**7."""

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]


def quantize(values: NDArray[np.float64] | float) -> NDArray[np.float64]:
    """Round to the leaf grid (exactly representable and exactly summable in float32)."""
    return np.round(np.asarray(values, dtype=np.float64) / LEAF_QUANTUM) * LEAF_QUANTUM


@dataclass(frozen=True)
class BinMapper:
    """Per-feature float32 split thresholds; a value's bin = number of thresholds below it."""

    thresholds: tuple[NDArray[np.float32], ...]

    @classmethod
    def fit(cls, X: NDArray[np.floating], max_bins: int = 64) -> BinMapper:
        X32 = np.asarray(X, dtype=np.float32)
        out = []
        for j in range(X32.shape[1]):
            values = np.unique(X32[:, j])
            values = values[np.isfinite(values)]
            if values.size > max_bins:
                qs = np.quantile(X32[:, j], np.linspace(0, 1, max_bins + 1)[1:-1])
                values = np.unique(values[np.searchsorted(values, qs.astype(np.float32))])
            if values.size < 2:
                out.append(np.zeros(0, dtype=np.float32))
                continue
            lo, hi = values[:-1], values[1:]
            mid = ((lo.astype(np.float64) + hi) / 2).astype(np.float32)
            mid = np.where(mid >= hi, lo, mid)  # keep lo <= thr < hi in float32
            out.append(np.unique(mid).astype(np.float32))
        return cls(tuple(out))

    @property
    def n_bins(self) -> NDArray[np.intp]:
        return np.array([t.size + 1 for t in self.thresholds], dtype=np.intp)

    def transform(self, X: NDArray[np.floating]) -> NDArray[np.uint8]:
        X32 = np.asarray(X, dtype=np.float32)
        codes = np.empty(X32.shape, dtype=np.uint8)
        for j, thr in enumerate(self.thresholds):
            codes[:, j] = np.searchsorted(thr, X32[:, j], side="left")
        return codes


@dataclass(frozen=True)
class Tree:
    """A fitted tree as flat arrays; ``feature == -1`` marks a leaf."""

    feature: NDArray[np.intp]
    threshold: NDArray[np.float32]
    left: NDArray[np.intp]
    right: NDArray[np.intp]
    value: FloatArray
    """[n_nodes, n_outputs]; meaningful at leaves."""
    gain: FloatArray | None = None
    """Per node: the split's impurity reduction before the cost penalty (0 at leaves)."""

    @property
    def features_used(self) -> frozenset[int]:
        return frozenset(int(f) for f in self.feature if f >= 0)

    def predict(self, X: NDArray[np.floating]) -> FloatArray:
        X32 = np.asarray(X, dtype=np.float32)
        node = np.zeros(X32.shape[0], dtype=np.intp)
        rows = np.arange(X32.shape[0])
        for _ in range(self.feature.size):
            feat = self.feature[node]
            inner = feat >= 0
            if not inner.any():
                break
            go_left = X32[rows, np.where(inner, feat, 0)] <= self.threshold[node]
            node = np.where(inner, np.where(go_left, self.left[node], self.right[node]), node)
        return self.value[node]


@dataclass(frozen=True)
class TreeParams:
    max_depth: int = 3
    min_samples_leaf: int = 20
    learning_rate: float = 0.1
    l2: float = 1.0
    gamma: float = 0.0


class _Growth:
    """Mutable node lists while growing one tree."""

    def __init__(self, n_outputs: int) -> None:
        self.feature: list[int] = []
        self.threshold: list[float] = []
        self.left: list[int] = []
        self.right: list[int] = []
        self.value: list[FloatArray] = []
        self.gain: list[float] = []
        self.n_outputs = n_outputs

    def add(self) -> int:
        self.feature.append(-1)
        self.threshold.append(0.0)
        self.left.append(-1)
        self.right.append(-1)
        self.value.append(np.zeros(self.n_outputs))
        self.gain.append(0.0)
        return len(self.feature) - 1

    def freeze(self) -> Tree:
        return Tree(
            feature=np.array(self.feature, dtype=np.intp),
            threshold=np.array(self.threshold, dtype=np.float32),
            left=np.array(self.left, dtype=np.intp),
            right=np.array(self.right, dtype=np.intp),
            value=np.array(self.value, dtype=np.float64).reshape(-1, self.n_outputs),
            gain=np.array(self.gain, dtype=np.float64),
        )


def _histograms(
    codes: NDArray[np.uint8], offsets: IntArray, total_bins: int, idx: IntArray, r: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Per (flat bin) sums of residuals [total_bins, K] and counts [total_bins]."""
    flat = (codes[idx].astype(np.intp) + offsets).ravel()
    d = codes.shape[1]
    count = np.bincount(flat, minlength=total_bins).astype(np.float64)
    sums = np.empty((total_bins, r.shape[1]))
    for k in range(r.shape[1]):
        weights = np.repeat(r[idx, k], d)
        sums[:, k] = np.bincount(flat, weights=weights, minlength=total_bins)
    return sums, count


def fit_tree(
    codes: NDArray[np.uint8],
    binner: BinMapper,
    residual: FloatArray,
    hessian: FloatArray,
    params: TreeParams,
    feature_cost: FloatArray,
    feature_sensor: IntArray,
    bought: NDArray[np.bool_],
    allowed: NDArray[np.bool_] | None = None,
) -> Tree:
    """Grow one depth-limited tree on ``residual`` [N, K]; ``bought`` is updated in place.

    ``feature_cost[j]`` is the scalar cost of feature j's sensor, ``feature_sensor[j]`` its
    sensor index, ``bought[s]`` whether sensor s is already paid for. ``allowed`` restricts the
    features a split may use (None = all).
    """
    n, d = codes.shape
    n_out = residual.shape[1]
    n_bins = binner.n_bins
    offsets = np.concatenate([[0], np.cumsum(n_bins)[:-1]]).astype(np.intp)
    total_bins = int(n_bins.sum())
    bin_feature = np.repeat(np.arange(d), n_bins)
    last_bin = np.zeros(total_bins, dtype=bool)
    last_bin[offsets + n_bins - 1] = True
    if allowed is not None:
        last_bin |= ~np.repeat(allowed, n_bins)
    growth = _Growth(n_out)
    root = growth.add()
    level: list[tuple[int, IntArray]] = [(root, np.arange(n))]
    for _depth in range(params.max_depth):
        next_level: list[tuple[int, IntArray]] = []
        for node, idx in level:
            if idx.size < 2 * params.min_samples_leaf:
                next_level.append((node, idx))
                continue
            split = _best_split(
                codes, offsets, total_bins, bin_feature, last_bin, idx, residual, params,
                feature_cost, feature_sensor, bought, n,
            )
            if split is None:
                next_level.append((node, idx))
                continue
            j, b, gain = split
            growth.gain[node] = gain
            go_left = codes[idx, j] <= b
            left, right = growth.add(), growth.add()
            growth.feature[node] = j
            growth.threshold[node] = float(binner.thresholds[j][b])
            growth.left[node], growth.right[node] = left, right
            bought[feature_sensor[j]] = True
            next_level += [(left, idx[go_left]), (right, idx[~go_left])]
        level = next_level
    for node, idx in level:
        if growth.feature[node] < 0:
            g = residual[idx].sum(axis=0)
            h = hessian[idx].sum(axis=0)
            growth.value[node] = quantize(params.learning_rate * g / (h + params.l2))
    return growth.freeze()


def _best_split(
    codes: NDArray[np.uint8],
    offsets: IntArray,
    total_bins: int,
    bin_feature: IntArray,
    invalid: NDArray[np.bool_],
    idx: IntArray,
    residual: FloatArray,
    params: TreeParams,
    feature_cost: FloatArray,
    feature_sensor: IntArray,
    bought: NDArray[np.bool_],
    n_total: int,
) -> tuple[int, int, float] | None:
    sums, count = _histograms(codes, offsets, total_bins, idx, residual)
    # cumulative sums within each feature: left side = bins <= b
    csum = np.cumsum(sums, axis=0)
    ccount = np.cumsum(count)
    start = offsets[bin_feature]
    base_sum = np.where((start > 0)[:, None], csum[np.maximum(start - 1, 0)], 0.0)
    base_count = np.where(start > 0, ccount[np.maximum(start - 1, 0)], 0.0)
    left_sum = csum - base_sum
    left_n = ccount - base_count
    total_sum = residual[idx].sum(axis=0)
    n_node = float(idx.size)
    right_sum = total_sum - left_sum
    right_n = n_node - left_n
    ok = (left_n >= params.min_samples_leaf) & (right_n >= params.min_samples_leaf) & ~invalid
    if not ok.any():
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = (
            (left_sum**2).sum(axis=1) / left_n
            + (right_sum**2).sum(axis=1) / right_n
            - (total_sum**2).sum() / n_node
        )
    gain = 0.5 * gain / n_total
    charged = ~bought[feature_sensor[bin_feature]] & (feature_cost[bin_feature] > 0)
    with np.errstate(invalid="ignore"):  # inf·0 / nan − inf outside ``ok`` are discarded
        penalty = np.where(charged, params.gamma * feature_cost[bin_feature], 0.0)
        penalised = np.where(ok, gain - penalty, -np.inf)
    best = int(np.argmax(penalised))
    if not penalised[best] > 1e-12:
        return None
    j = int(bin_feature[best])
    return j, int(best - offsets[j]), float(gain[best])


def predict_trees(trees: list[Tree], X: NDArray[np.floating], n_outputs: int) -> FloatArray:
    out = np.zeros((np.asarray(X).shape[0], n_outputs))
    for tree in trees:
        out += tree.predict(X)
    return out


def feature_gains(trees: list[Tree], n_features: int) -> FloatArray:
    """Total split gain per feature over ``trees`` (an importance ranking)."""
    out = np.zeros(n_features)
    for tree in trees:
        inner = tree.feature >= 0
        if tree.gain is not None and inner.any():
            np.add.at(out, tree.feature[inner], tree.gain[inner])
    return out
