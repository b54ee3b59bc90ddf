"""The HPC answer cache asks the model only about rows it has not answered under that mask, keeps
the answers on disk for the next process, and never trusts a file it cannot read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from adaptedge.simulator.hpc_cache import HpcAnswers, rows_digest

F32 = npt.NDArray[np.float32]


class CountingHpc:
    """A stand-in HPC: the label is the sign of the sum of measured columns; counts its rows."""

    def __init__(self) -> None:
        self.rows = 0

    def __call__(self, x: F32, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        self.rows += len(x)
        return (np.where(mask, x, 0.0).sum(axis=1) > 0).astype(np.int64)


def _rows(n: int) -> F32:
    return np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)


def test_rows_are_asked_once_per_mask(tmp_path: Path) -> None:
    X = _rows(200)
    hpc = CountingHpc()
    cache = HpcAnswers("ab" * 32, hpc, None)
    digest = rows_digest(X)
    full, half = np.ones(4, dtype=bool), np.array([True, True, False, False])
    first = np.arange(0, 120)
    got = cache.labels(X, digest, first, full)
    assert hpc.rows == 120
    assert (got == CountingHpc()(X[first], full)).all()
    again = cache.labels(X, digest, np.arange(100, 200), full)  # 80 new rows
    assert hpc.rows == 200 == cache.computed
    assert (again == CountingHpc()(X[100:], full)).all()
    other = cache.labels(X, digest, first, half)  # another mask: another table
    assert hpc.rows == 320
    assert (other == CountingHpc()(X[first], half)).all()
    assert (other != got).any(), "the test's two masks should give different answers"


def test_disk_tables_are_reused_and_a_broken_one_is_recomputed(tmp_path: Path) -> None:
    X = _rows(100)
    digest, rows, mask = rows_digest(X), np.arange(100), np.ones(4, dtype=bool)
    first = HpcAnswers("cd" * 32, CountingHpc(), tmp_path)
    want = first.labels(X, digest, rows, mask)
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].suffix == ".npy"
    hpc = CountingHpc()
    assert (HpcAnswers("cd" * 32, hpc, tmp_path).labels(X, digest, rows, mask) == want).all()
    assert hpc.rows == 0  # a new process: all from disk
    other_hpc = CountingHpc()  # another HPC file: its own table
    HpcAnswers("ef" * 32, other_hpc, tmp_path).labels(X, digest, rows, mask)
    assert other_hpc.rows == 100
    files[0].write_bytes(b"not a numpy file")
    hpc = CountingHpc()
    assert (HpcAnswers("cd" * 32, hpc, tmp_path).labels(X, digest, rows, mask) == want).all()
    assert hpc.rows == 100


def test_the_digest_sees_values_and_shape() -> None:
    X = _rows(10)
    Y = X.copy()
    Y[3, 2] = np.nextafter(Y[3, 2], np.float32(np.inf))
    assert rows_digest(X) == rows_digest(X.copy())
    assert rows_digest(X) != rows_digest(Y)
    assert rows_digest(X) != rows_digest(X.reshape(20, 2))


def test_regression_values_are_asked_once_and_kept_apart_on_disk(tmp_path: Path) -> None:
    """A regression HPC's values: float32 per row, asked once, in files of their own (a label
    table of the same HPC, rows and mask is another file)."""
    X = _rows(100)
    digest, mask = rows_digest(X), np.ones(4, dtype=bool)
    asked = []

    def values(x: F32, m: npt.NDArray[np.bool_]) -> F32:
        asked.append(len(x))
        return np.where(m, x, 0.0).sum(axis=1).astype(np.float32)

    cache = HpcAnswers("ef" * 32, values, tmp_path, values=True)
    got = cache.values(X, digest, np.arange(60), mask)
    assert got.dtype == np.float32 and np.array_equal(got, X[:60].sum(axis=1))
    both = cache.values(X, digest, np.arange(40, 100), mask)
    assert asked == [60, 40] and np.array_equal(both, X[40:].sum(axis=1))
    HpcAnswers("ef" * 32, CountingHpc(), tmp_path).labels(X, digest, np.arange(100), mask)
    assert sorted(f.name.endswith("-v.npy") for f in tmp_path.iterdir()) == [False, True]
    again = HpcAnswers("ef" * 32, values, tmp_path, values=True)
    assert np.array_equal(again.values(X, digest, np.arange(100), mask), X.sum(axis=1))
    assert asked == [60, 40]  # a new process: every value from disk
