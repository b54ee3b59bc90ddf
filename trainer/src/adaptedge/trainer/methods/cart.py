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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

_fill_histograms: Callable[[Any, Any, Any, Any, Any], None] | None
_split_rows: Callable[[Any, Any, int, Any], int] | None
_sum_rows: Callable[[Any, list[Any], Any], None] | None
try:  # the inner loops in C; without them (no compiler at install) numpy's, the same bits
    from adaptedge.trainer.methods._tree_loops import fill as _fill_histograms
    from adaptedge.trainer.methods._tree_loops import split as _split_rows
    from adaptedge.trainer.methods._tree_loops import sums as _sum_rows
except ImportError:  # pragma: no cover - an install without a compiler
    _fill_histograms = _split_rows = _sum_rows = None

LEAF_QUANTUM = 2.0**-16
"""Leaf values are multiples of this: float32 sums of such values are exact below 2**7."""

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
FlatBins = NDArray[np.unsignedinteger[Any]]
"""Rows' flat bins (``BinnedRows.flat``): uint16, or uint32 past 65,536 bins."""


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
            column = X32[:, j]
            column = column[np.isfinite(column)]  # missing (NaN) values take no part in bins
            values = np.unique(column)
            if values.size > max_bins:
                qs = np.quantile(column, np.linspace(0, 1, max_bins + 1)[1:-1])
                at = np.searchsorted(values, qs.astype(np.float32))
                values = np.unique(values[np.minimum(at, values.size - 1)])
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
        self.value: dict[int, FloatArray] = {}
        """Leaf values by node; every other node's value is 0."""
        self.gain: list[float] = []
        self.n_outputs = n_outputs

    def add(self) -> int:
        self.feature.append(-1)
        self.threshold.append(0.0)
        self.left.append(-1)
        self.right.append(-1)
        self.gain.append(0.0)
        return len(self.feature) - 1

    def freeze(self) -> Tree:
        value = np.zeros((len(self.feature), self.n_outputs))
        for node, leaf in self.value.items():
            value[node] = leaf
        return Tree(
            feature=np.array(self.feature, dtype=np.intp),
            threshold=np.array(self.threshold, dtype=np.float32),
            left=np.array(self.left, dtype=np.intp),
            right=np.array(self.right, dtype=np.intp),
            value=value,
            gain=np.array(self.gain, dtype=np.float64),
        )


@dataclass(frozen=True)
class _BinLayout:
    """One flat bin axis of ``width`` bins per feature (bin b of feature j at ``j·width + b``),
    which bins may not split, and the features a histogram reads."""

    width: int
    total_bins: int
    offsets: IntArray
    """``j · width``: where feature j's bins start."""
    bin_feature: IntArray
    invalid: NDArray[np.bool_]
    """A split after this bin is not allowed: a feature's last bin, a padding bin past it, or a
    feature not allowed."""
    columns: IntArray
    """The allowed features, ascending: the only columns a histogram reads."""

    @classmethod
    def of(cls, binner: BinMapper, allowed: NDArray[np.bool_] | None) -> _BinLayout:
        n_bins = binner.n_bins
        d, width = n_bins.size, int(n_bins.max(initial=1))
        bin_index = np.tile(np.arange(width), d)
        bin_feature = np.repeat(np.arange(d), width)
        invalid = bin_index >= (n_bins - 1)[bin_feature]
        columns = np.arange(d, dtype=np.intp)
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=bool)
            invalid |= ~allowed[bin_feature]
            columns = np.flatnonzero(allowed).astype(np.intp)
        return cls(width, d * width, (np.arange(d) * width).astype(np.intp), bin_feature,
                   invalid, columns)


@dataclass(frozen=True)
class BinnedRows:
    """What every tree grown on the same binned rows shares: each row's flat bin per feature
    [N, d] (``j·width + code``), the root's bin counts (every row is at the root) and the codes
    feature by feature [d, N] (a split reads one feature of its node's rows)."""

    flat: FlatBins
    root_count: IntArray
    columns: NDArray[np.uint8]
    layouts: dict[tuple[int, bytes | None], tuple[_BinLayout, FlatBins]] = field(
        default_factory=dict, compare=False, repr=False)
    """``layout``'s cache: one per (binner, allowed features), with ``flat``'s allowed columns."""

    @classmethod
    def of(cls, codes: NDArray[np.uint8], binner: BinMapper) -> BinnedRows:
        n_bins = binner.n_bins
        width = int(n_bins.max(initial=1))
        dtype = flat_bin_dtype(n_bins.size * width)
        flat = codes.astype(dtype) + (np.arange(n_bins.size) * width).astype(dtype)
        root_count = np.bincount(flat.ravel(), minlength=n_bins.size * width)
        return cls(flat, root_count, np.ascontiguousarray(codes.T))

    def layout(self, binner: BinMapper, allowed: NDArray[np.bool_] | None
               ) -> tuple[_BinLayout, FlatBins]:
        """``_BinLayout.of(binner, allowed)`` and the rows' flat bins of its columns [N, k],
        built once per fit and restriction (a refinement round histograms only its features)."""
        key = (id(binner), None if allowed is None else np.asarray(allowed, bool).tobytes())
        if key not in self.layouts:
            layout = _BinLayout.of(binner, allowed)
            flat = (self.flat if layout.columns.size == self.flat.shape[1]
                    else np.ascontiguousarray(self.flat[:, layout.columns]))
            self.layouts[key] = (layout, flat)
        return self.layouts[key]


def flat_bin_dtype(total_bins: int) -> type[np.unsignedinteger[Any]]:
    """The narrowest of uint16 and uint32 that holds every flat bin: each histogram pass reads
    the rows' flat bins once, so narrower bins are less memory to read."""
    if total_bins <= np.iinfo(np.uint16).max + 1:
        return np.uint16
    if total_bins <= np.iinfo(np.uint32).max + 1:
        return np.uint32
    raise ValueError(f"{total_bins} histogram bins are more than uint32 indexes; use fewer "
                     f"features or max_bins")


def grow_tree(
    codes: NDArray[np.uint8],
    binner: BinMapper,
    residual: FloatArray,
    hessian: FloatArray,
    params: TreeParams,
    feature_cost: FloatArray,
    feature_sensor: IntArray,
    bought: NDArray[np.bool_],
    allowed: NDArray[np.bool_] | None = None,
    rows: BinnedRows | None = None,
) -> tuple[Tree, FloatArray]:
    """Grow one depth-limited tree on ``residual`` [N, K]; ``bought`` is updated in place.

    ``feature_cost[j]`` is the scalar cost of feature j's sensor, ``feature_sensor[j]`` its
    sensor index, ``bought[s]`` whether sensor s is already paid for. ``allowed`` restricts the
    features a split may use (None = all). Returns the tree and its prediction on the training
    rows [N, K] (each row's leaf value: what ``Tree.predict`` gives on the binned data, without
    walking it).

    Grown level by level: one histogram pass over all rows per level (each row adds to its
    node's bins, in row order, so every sum is the one a per-node pass would give); nodes then
    split in order, each seeing the sensors its left siblings bought. ``rows``: the binned
    rows' shared arrays (``BinnedRows.of(codes, binner)``), to compute them once per fit.
    """
    n = codes.shape[0]
    n_out = residual.shape[1]
    rows = rows or BinnedRows.of(codes, binner)
    layout, flat = rows.layout(binner, allowed)
    residual = np.ascontiguousarray(residual, dtype=np.float64)
    # numpy's pass (no C module) weighs each output's bincount by it repeated per column,
    # row-major like flat: built once per tree, not per level
    weights = None if _fill_histograms is not None else [
        np.repeat(residual[:, k], flat.shape[1]) for k in range(n_out)]
    penalty = _Penalty.of(layout, params, feature_cost, feature_sensor)
    growth = _Growth(n_out)
    level: list[tuple[int, IntArray]] = [(growth.add(), np.arange(n))]
    for _depth in range(params.max_depth):
        active = [idx for _, idx in level if idx.size >= 2 * params.min_samples_leaf]
        if not active:
            break
        gain, ok = _level_gains(rows, flat, weights, layout, active, residual, params)
        picks = _choose(gain, ok, layout, penalty, bought)
        next_level: list[tuple[int, IntArray]] = []
        s, bought_here = 0, False  # bought_here: a left sibling bought a sensor this level
        for node, idx in level:
            split = None
            if idx.size >= 2 * params.min_samples_leaf:
                split = (_choose(gain[s:s + 1], ok[s:s + 1], layout, penalty, bought)[0]
                         if bought_here else picks[s])
                s += 1
            if split is None:
                next_level.append((node, idx))
                continue
            j, b, growth.gain[node] = split
            left_rows, right_rows = split_rows(rows.columns[j], idx, b)
            left, right = growth.add(), growth.add()
            growth.feature[node] = j
            growth.threshold[node] = float(binner.thresholds[j][b])
            growth.left[node], growth.right[node] = left, right
            sensor = feature_sensor[j]
            bought_here = bought_here or not bought[sensor]
            bought[sensor] = True
            next_level += [(left, left_rows), (right, right_rows)]
        level = next_level
    fitted = np.zeros((n, n_out))
    leaves = [(node, idx) for node, idx in level if growth.feature[node] < 0]
    if leaves:  # every leaf's Newton step at once (elementwise: the same bits as one by one)
        leaf_rows = [idx for _, idx in leaves]
        g, h = node_sums(residual, leaf_rows), node_sums(hessian, leaf_rows)
        values = quantize(params.learning_rate * g / (h + params.l2))
        for (node, idx), value in zip(leaves, values, strict=True):
            growth.value[node] = value
            fitted[idx] = value
    return growth.freeze(), fitted


def split_rows(column: NDArray[np.uint8], idx: IntArray, b: int) -> tuple[IntArray, IntArray]:
    """A node's rows ``idx`` (ascending) split at bin ``b`` of ``column`` (one feature's codes
    of every row): those with ``column[row] <= b``, then the others, each still ascending. In
    one C pass (``_tree_loops``) where built, else numpy's (the same two arrays)."""
    if _split_rows is None:
        go_left = column[idx] <= b
        return idx[go_left], idx[~go_left]
    out = np.empty_like(idx)
    n_left = _split_rows(column, idx, b, out)
    return out[:n_left], out[n_left:]


def node_sums(values: FloatArray, nodes: list[IntArray]) -> FloatArray:
    """[len(nodes), K]: each node's ``values[rows].sum(axis=0)`` (``values`` [N, K]), in one C
    call (``_tree_loops``) where built and ``values`` are float64, else numpy's: the same bits
    either way."""
    if _sum_rows is None or values.dtype != np.float64:
        return np.stack([values[idx].sum(axis=0) for idx in nodes])
    out = np.empty((len(nodes), values.shape[1]))
    _sum_rows(np.ascontiguousarray(values), nodes, out)
    return out


def _node_slots(active: list[IntArray], n_total: int) -> IntArray:
    """Each row's active node, or ``len(active)`` (a spare slot) for a row of none."""
    slot = np.full(n_total, len(active), dtype=np.intp)
    for s, idx in enumerate(active):
        slot[idx] = s
    return slot


def _node_histograms(
    rows: BinnedRows, flat: FlatBins, weights: list[FloatArray] | None,
    active: list[IntArray], residual: FloatArray, tb: int,
) -> tuple[NDArray[np.int64], FloatArray]:
    """Per active node and flat bin: its rows [n_nodes, tb] and their summed residuals
    [n_nodes · tb, K], each sum adding its rows in row order (so a bin's sums are those a
    per-node pass would give): ``_tree_loops.fill`` in C (one pass for every output), else
    ``numpy.bincount`` over ``weights`` (a pass per output), bit for bit the same."""
    n_nodes, n_total = len(active), flat.shape[0]
    root = n_nodes == 1 and active[0].size == n_total  # the root: every row
    if weights is None:  # the C pass (grow_tree builds no weights for it)
        assert _fill_histograms is not None
        slot = np.zeros(n_total, dtype=np.intp) if root else _node_slots(active, n_total)
        count = np.empty((n_nodes, tb), dtype=np.int64)
        sums = np.empty((n_nodes * tb, residual.shape[1]))
        _fill_histograms(flat, slot, residual, count, sums)
        return count, sums
    where: NDArray[np.integer[Any]]  # the root's: flat's own bins, not copied
    if root:  # counts known
        where, size, count = flat.ravel(), tb, rows.root_count[None, :]
    else:
        where = ((_node_slots(active, n_total) * tb)[:, None] + flat).ravel()
        size = (n_nodes + 1) * tb
        count = np.bincount(where, minlength=size)[: n_nodes * tb].reshape(n_nodes, tb)
    sums = np.stack([np.bincount(where, weights=w, minlength=size)[: n_nodes * tb]
                     for w in weights], axis=-1)
    return count, sums


def _level_gains(
    rows: BinnedRows, flat: FlatBins, weights: list[FloatArray] | None, layout: _BinLayout,
    active: list[IntArray], residual: FloatArray, params: TreeParams,
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Per active node (rows ``active[s]``): every bin's split gain before the cost penalty
    and whether the split leaves ``min_samples_leaf`` rows on both sides.

    ``flat``: the rows' flat bins of ``layout.columns`` only (``BinnedRows.layout``); a bin's
    sum adds its node's rows in row order, and left sums are cumulative within the feature, so
    a bin's gain does not depend on which other features are histogrammed."""
    n_nodes, tb, width = len(active), layout.total_bins, layout.width
    n_total = flat.shape[0]
    count, sums = _node_histograms(rows, flat, weights, active, residual, tb)
    n_out = residual.shape[1]
    # left side = bins <= b of the same feature: cumulative sums along each feature's bins
    left_sum = np.cumsum(sums.reshape(n_nodes, -1, width, n_out), axis=2
                         ).reshape(n_nodes, tb, n_out)
    left_n = np.cumsum(count.astype(np.float64).reshape(n_nodes, -1, width), axis=2
                       ).reshape(n_nodes, tb)
    total_sum = node_sums(residual, active)
    n_node = np.array([float(idx.size) for idx in active])[:, None]
    right_sum = total_sum[:, None, :] - left_sum
    right_n = n_node - left_n
    ok = ((left_n >= params.min_samples_leaf) & (right_n >= params.min_samples_leaf)
          & ~layout.invalid)
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = (
            _sum_of_squares(left_sum) / left_n
            + _sum_of_squares(right_sum) / right_n
            - _sum_of_squares(total_sum)[:, None] / n_node
        )
    gain = 0.5 * gain / n_total
    return gain, ok


def _sum_of_squares(sums: FloatArray) -> FloatArray:
    """``(sums**2).sum(axis=-1)``; with one output, the squares themselves (the same bits: a
    sum over one element is that element) without the reduction."""
    if sums.shape[-1] == 1:
        out: FloatArray = np.square(sums[..., 0])
        return out
    total: FloatArray = (sums**2).sum(axis=-1)
    return total


@dataclass(frozen=True)
class _Penalty:
    """Per flat bin: its feature's sensor, whether that costs anything, and γ · its cost."""

    sensor: IntArray
    costly: NDArray[np.bool_]
    charge: FloatArray

    @classmethod
    def of(cls, layout: _BinLayout, params: TreeParams, feature_cost: FloatArray,
           feature_sensor: IntArray) -> _Penalty:
        cost = feature_cost[layout.bin_feature]
        with np.errstate(invalid="ignore"):  # γ = 0 with an infinite cost: used only if charged
            charge = params.gamma * cost
        return cls(feature_sensor[layout.bin_feature], cost > 0, charge)


def _choose(
    gain: FloatArray, ok: NDArray[np.bool_], layout: _BinLayout, penalty: _Penalty,
    bought: NDArray[np.bool_],
) -> list[tuple[int, int, float] | None]:
    """Per node (row of ``gain`` and ``ok`` [nodes, bins]): the best split (feature, bin,
    gain) after the penalty for sensors not yet bought, or None."""
    charged = ~bought[penalty.sensor] & penalty.costly
    with np.errstate(invalid="ignore"):  # inf·0 / nan − inf outside ``ok`` are discarded
        penalised = np.where(ok, gain - np.where(charged, penalty.charge, 0.0), -np.inf)
    out: list[tuple[int, int, float] | None] = []
    for s, best in enumerate(np.argmax(penalised, axis=1).tolist()):
        if not penalised[s, best] > 1e-12:  # also when no bin is ``ok``: all −inf
            out.append(None)
            continue
        j = int(layout.bin_feature[best])
        out.append((j, best - int(layout.offsets[j]), float(gain[s, best])))
    return out


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
