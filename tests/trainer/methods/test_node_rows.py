"""A tree node's rows in C (``trainer/methods/_node_rows.c``): the split gives numpy's masks'
rows in order, the sums numpy's sums bit for bit (signed zeros too), refusals come before any
write, and the install builds it where a compiler is (``test_cart_equivalence`` grows the same
trees with it and without it)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from adaptedge.trainer.methods import cart

split, sums = cart._split_rows, cart._sum_rows
needs_c = pytest.mark.skipif(split is None or sums is None,
                             reason="the C node-rows module was not built")


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
    with pytest.raises(ValueError, match=r"node 1's row 10 is outside 0..9"):
        sums(values, [np.array([0, 1], dtype=np.intp), np.array([10], dtype=np.intp)], out)
    assert (out == -7.0).all()  # nothing written
    with pytest.raises(ValueError, match=r"out must be \[2, 2\]"):
        sums(values, [np.array([0], dtype=np.intp)] * 2, np.empty((3, 2)))
    with pytest.raises(ValueError, match="values must be a C-ordered 2-d array of 8-byte"):
        sums(np.ones(10), [np.array([0], dtype=np.intp)], np.empty((1, 1)))
    with pytest.raises(ValueError, match="each node must be"):
        sums(values, [np.array([0], dtype=np.int32), np.array([0], dtype=np.intp)], out)
    with pytest.raises(TypeError, match="a list of intp arrays"):
        sums(values, (np.array([0], dtype=np.intp),), out)  # type: ignore[arg-type]


def test_the_install_built_the_node_rows_module() -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: the trees use numpy's split and sums")
    assert split is not None and sums is not None, "a C compiler is here but `pip install` " \
        "did not build trainer/methods/_node_rows.c: see the install log"
