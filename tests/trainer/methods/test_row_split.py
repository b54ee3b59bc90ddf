"""A tree node's row split in C (``trainer/methods/_row_split.c``): numpy's masks' rows, in
order, refusals before any write, and built by the install where a compiler is
(``test_cart_equivalence`` grows the same trees with it and without it)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from adaptedge.trainer.methods import cart

split = cart._split_rows
needs_c = pytest.mark.skipif(split is None, reason="the C row split was not built")


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


def test_the_install_built_the_row_split() -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: the trees use numpy's row split")
    assert split is not None, "a C compiler is here but `pip install` did not build " \
        "trainer/methods/_row_split.c: see the install log"
