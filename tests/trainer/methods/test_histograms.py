"""The trees' histogram pass in C (``trainer/methods/_histograms.c``): numpy.bincount's counts
and sums bit for bit, refusals before any write, and built by the install where a compiler is
(``test_cart_equivalence`` grows the same trees with it and without it)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from adaptedge.trainer.methods import cart

fill = cart._fill_histograms
needs_c = pytest.mark.skipif(fill is None, reason="the C histogram pass was not built")


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
    with pytest.raises(ValueError, match="flat bin"):
        fill(bad_bin, slot, residual, count, sums)
    with pytest.raises(ValueError, match="slot"):
        fill(flat, bad_slot, residual, count, sums)
    assert (count == 7).all()  # nothing written
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


def test_the_install_built_the_histogram_pass() -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: the trees use numpy's histogram pass")
    assert fill is not None, "a C compiler is here but `pip install` did not build " \
        "trainer/methods/_histograms.c: see the install log"
