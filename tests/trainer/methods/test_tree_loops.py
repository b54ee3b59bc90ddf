"""The histogram trees' inner loops in C (``trainer/methods/_tree_loops.c``), each against its
numpy form: the histogram pass gives numpy.bincount's counts and sums bit for bit (narrow flat
bins too), the split numpy's masks' rows in order, the sums numpy's sums bit for bit (signed
zeros too); refusals come before any write, and the install builds it where a compiler is
(``test_cart_equivalence`` grows the same trees with it and without it)."""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest

from adaptedge.trainer.methods import cart

fill, split, sums = cart._fill_histograms, cart._split_rows, cart._sum_rows
needs_c = pytest.mark.skipif(fill is None or split is None or sums is None,
                             reason="the C inner loops were not built")


def _case(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    rng = np.random.default_rng(seed)
    n, d, width = int(rng.integers(2, 3000)), int(rng.integers(1, 20)), int(rng.integers(2, 70))
    n_nodes, n_out = int(rng.integers(1, 9)), int(rng.integers(1, 12))
    flat = (rng.integers(0, width, (n, d)) + np.arange(d) * width).astype(np.intp)
    slot = rng.integers(0, n_nodes + 1, n).astype(np.intp)  # n_nodes: a row of no node
    residual = rng.normal(size=(n, n_out)) * rng.choice([1e-8, 1.0, 1e8], size=(n, 1))
    return flat, slot, residual, n_nodes, d * width


def _bincount(flat: np.ndarray, slot: np.ndarray, residual: np.ndarray, n_nodes: int,
              tb: int) -> tuple[np.ndarray, np.ndarray]:
    where = ((slot * tb)[:, None] + flat).ravel()
    size = (n_nodes + 1) * tb
    count = np.bincount(where, minlength=size)[: n_nodes * tb].reshape(n_nodes, tb)
    sums = np.stack([np.bincount(where, weights=np.repeat(residual[:, k], flat.shape[1]),
                                 minlength=size)[: n_nodes * tb]
                     for k in range(residual.shape[1])], axis=-1)
    return count, sums


@needs_c
@pytest.mark.parametrize("seed", range(8))
def test_fill_is_bincount_bit_for_bit(seed: int) -> None:
    assert fill is not None
    flat, slot, residual, n_nodes, tb = _case(seed)
    count = np.full((n_nodes, tb), -1, dtype=np.int64)  # every cell is written
    sums = np.full((n_nodes * tb, residual.shape[1]), np.nan)
    fill(flat, slot, residual, count, sums)
    want_count, want_sums = _bincount(flat, slot, residual, n_nodes, tb)
    assert np.array_equal(count, want_count)
    assert np.array_equal(sums.view(np.int64), want_sums.view(np.int64))  # the same bits


@needs_c
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
def test_narrow_flat_bins_give_the_intp_sums_bit_for_bit(seed: int, dtype: type) -> None:
    assert fill is not None
    flat, slot, residual, n_nodes, tb = _case(seed)
    want_count, want_sums = np.empty((n_nodes, tb), np.int64), np.empty((n_nodes * tb,
                                                                        residual.shape[1]))
    fill(flat, slot, residual, want_count, want_sums)
    count, sums = np.empty_like(want_count), np.empty_like(want_sums)
    fill(flat.astype(dtype), slot, residual, count, sums)
    assert np.array_equal(count, want_count)
    assert np.array_equal(sums.view(np.int64), want_sums.view(np.int64))


def test_flat_bins_are_the_narrowest_unsigned_type_that_holds_them() -> None:
    assert cart.flat_bin_dtype(65_536) is np.uint16
    assert cart.flat_bin_dtype(65_537) is np.uint32
    with pytest.raises(ValueError, match="more than uint32"):
        cart.flat_bin_dtype(2**32 + 1)
    codes = np.zeros((3, 2), dtype=np.uint8)
    binner = cart.BinMapper.fit(np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]]))
    assert cart.BinnedRows.of(codes, binner).flat.dtype == np.uint16


@needs_c
def test_fill_refuses_out_of_range_and_misshapen_input_before_writing() -> None:
    assert fill is not None
    flat, slot, residual, n_nodes, tb = _case(0)
    count = np.full((n_nodes, tb), 7, dtype=np.int64)
    sums = np.zeros((n_nodes * tb, residual.shape[1]))
    bad_bin, bad_slot = flat.copy(), slot.copy()
    bad_bin[-1, -1], bad_slot[0] = tb, n_nodes + 1
    arrays = (flat, slot, residual, count, sums, bad_bin, bad_slot)
    held = [sys.getrefcount(a) for a in arrays]
    with pytest.raises(ValueError, match="flat bin"):
        fill(bad_bin, slot, residual, count, sums)
    with pytest.raises(ValueError, match=rf"slot\[0\] = {n_nodes + 1} is outside 0..{n_nodes}"):
        fill(flat, bad_slot, residual, count, sums)
    with pytest.raises(ValueError, match="fill: sums must be a C-ordered 2-d array"):
        fill(flat, slot, residual, count, sums.ravel())  # a view refused after four taken
    assert (count == 7).all()  # nothing written
    assert [sys.getrefcount(a) for a in arrays] == held  # every buffer taken was released
    with pytest.raises(ValueError, match="shapes disagree"):
        fill(flat, slot[:-1], residual, count, sums)
    for wrong in (np.int32, np.int16, np.float64):  # flat: uint16, uint32 or intp only
        with pytest.raises(ValueError, match="uint16, uint32 or intp"):
            fill(flat.astype(wrong), slot, residual, count, sums)
    with pytest.raises(ValueError, match="C-ordered"):
        fill(flat, slot, residual, count.astype(np.int32), sums)
    strided = np.hstack([flat, flat])[:, :flat.shape[1]]  # a view, not C-contiguous
    with pytest.raises(ValueError, match="C-contiguous"):
        fill(strided, slot, residual, count, sums)
    with pytest.raises(TypeError, match="5 arrays"):
        fill(flat, slot, residual, count)  # type: ignore[call-arg]


@needs_c
@pytest.mark.parametrize("seed", range(8))
def test_split_gives_numpys_left_and_right_rows_in_order(seed: int) -> None:
    assert split is not None
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    column = rng.integers(0, 64, n).astype(np.uint8)
    rows = np.sort(rng.choice(n, size=int(rng.integers(0, n + 1)), replace=False)).astype(np.intp)
    b = int(rng.integers(-1, 65))  # -1: every row right; 64: every row left
    out = np.full(rows.size, -1, dtype=np.intp)
    n_left = split(column, rows, b, out)
    go_left = column[rows] <= b
    assert n_left == int(go_left.sum())
    assert np.array_equal(out[:n_left], rows[go_left])
    assert np.array_equal(out[n_left:], rows[~go_left])
    left, right = cart.split_rows(column, rows, b)  # cart's wrapper: the same two arrays
    assert np.array_equal(left, rows[go_left]) and np.array_equal(right, rows[~go_left])


@needs_c
def test_split_refuses_bad_rows_and_arrays_before_writing() -> None:
    assert split is not None
    column = np.arange(10, dtype=np.uint8)
    out = np.full(3, -7, dtype=np.intp)
    with pytest.raises(ValueError, match=r"rows\[2\] = 10 is outside 0..9"):
        split(column, np.array([0, 1, 10], dtype=np.intp), 4, out)
    with pytest.raises(ValueError, match=r"rows\[0\] = -1"):
        split(column, np.array([-1, 1, 2], dtype=np.intp), 4, out)
    assert (out == -7).all()  # nothing written
    with pytest.raises(ValueError, match="out holds 3 rows, rows 2"):
        split(column, np.array([0, 1], dtype=np.intp), 4, out)
    with pytest.raises(ValueError, match="column must be a C-ordered 1-d array of 1-byte"):
        split(column.astype(np.int64), np.array([0, 1, 2], dtype=np.intp), 4, out)
    with pytest.raises(ValueError, match="rows must be"):
        split(column, np.array([0, 1, 2], dtype=np.int32), 4, out)
    with pytest.raises(TypeError, match="4 arguments"):
        split(column, np.array([0], dtype=np.intp), 4)  # type: ignore[call-arg]


@needs_c
@pytest.mark.parametrize("seed", range(10))
def test_sums_are_numpys_sums_bit_for_bit(seed: int) -> None:
    assert sums is not None
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 4000)), int(rng.choice([1, 1, 2, 3, 7, 8, 9, 26]))
    values = rng.normal(size=(n, k)) * rng.choice([1e-12, 1.0, 1e12], size=(n, 1))
    values[rng.random((n, k)) < 0.1] = -0.0  # signed zeros: numpy's sum starts at +0.0
    values[rng.random((n, k)) < 0.05] = 0.0
    sizes = [0, 1, 7, 8, 9, 127, 128, 129, 300, n]  # numpy's pairwise blocks and halves
    nodes = [np.sort(rng.choice(n, size=min(m, n), replace=False)).astype(np.intp)
             for m in sizes]
    nodes.append(np.flatnonzero(values[:, 0] == 0.0).astype(np.intp))  # zeros only
    out = np.full((len(nodes), k), np.nan)
    sums(values, nodes, out)
    want = np.stack([values[idx].sum(axis=0) for idx in nodes])
    assert np.array_equal(out.view(np.int64), want.view(np.int64))  # the same bits
    assert np.array_equal(cart.node_sums(values, nodes).view(np.int64), want.view(np.int64))


@needs_c
def test_sums_refuses_bad_rows_and_arrays_before_writing() -> None:
    assert sums is not None
    values = np.ones((10, 2))
    out = np.full((2, 2), -7.0)
    good, bad = np.array([0, 1], dtype=np.intp), np.array([10], dtype=np.intp)
    held = [sys.getrefcount(a) for a in (good, bad, values, out)]
    for _ in range(3):
        with pytest.raises(ValueError, match=r"node 1's row 10 is outside 0..9"):
            sums(values, [good, bad, good], np.empty((3, 2)))
        with pytest.raises(ValueError, match=r"node 1's row 10 is outside 0..9"):
            sums(values, [good, bad], out)
    assert (out == -7.0).all()  # nothing written
    assert [sys.getrefcount(a) for a in (good, bad, values, out)] == held  # buffers released
    with pytest.raises(ValueError, match=r"out must be \[2, 2\]"):
        sums(values, [np.array([0], dtype=np.intp)] * 2, np.empty((3, 2)))
    with pytest.raises(ValueError, match="values must be a C-ordered 2-d array of 8-byte"):
        sums(np.ones(10), [np.array([0], dtype=np.intp)], np.empty((1, 1)))
    with pytest.raises(ValueError, match="each node must be"):
        sums(values, [np.array([0], dtype=np.int32), np.array([0], dtype=np.intp)], out)
    with pytest.raises(TypeError, match="a list of intp arrays"):
        sums(values, (np.array([0], dtype=np.intp),), out)  # type: ignore[arg-type]



def test_the_install_built_the_inner_loops() -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: the trees use numpy's loops")
    assert fill is not None and split is not None and sums is not None, "a C compiler is " \
        "here but `pip install` did not build trainer/methods/_tree_loops.c: see the install log"


def test_node_sums_of_other_dtypes_and_strided_values_are_numpys() -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(size=(500, 6))
    nodes = [np.arange(0, 500, 3, dtype=np.intp), np.arange(7, dtype=np.intp)]
    strided = values[:, ::2]  # float64, not C-contiguous: the C loop reads a contiguous copy
    want = np.stack([strided[idx].sum(axis=0) for idx in nodes])
    assert np.array_equal(cart.node_sums(strided, nodes).view(np.int64), want.view(np.int64))
    narrow = values.astype(np.float32)  # not float64: numpy's own float32 arithmetic
    want32 = np.stack([narrow[idx].sum(axis=0) for idx in nodes])
    got32 = cart.node_sums(narrow, nodes)  # type: ignore[arg-type]
    assert got32.dtype == np.float32 and np.array_equal(got32, want32)
