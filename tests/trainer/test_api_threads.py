"""Training runs one BLAS thread in its own process (``trainer.api``, ``methods.dag.bank``):
on a busy 2-core machine a second OpenBLAS thread spins (gas greedy-acc --quick: 274.9 s wall
at load 3 with two BLAS threads, 10.1 s with one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_info

from adaptedge.trainer import api
from adaptedge.trainer.methods.dag.bank import fit_model


def _blas_threads() -> int:
    return max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"),
               default=1)


@pytest.fixture(autouse=True)
def _threaded_blas() -> None:
    if _blas_threads() < 2:
        pytest.skip("BLAS runs one thread here anyway: nothing to limit")


class _Seen(LogisticRegression):  # type: ignore[misc]
    threads: list[int] = []  # noqa: RUF012  (a class-level record across clones)

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> _Seen:
        _Seen.threads.append(_blas_threads())
        super().fit(X, y, sample_weight)
        return self


def test_a_bank_fit_runs_one_blas_thread() -> None:
    _Seen.threads.clear()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    fit_model(_Seen(), X, (X[:, 0] > 0).astype(np.int64))
    assert _Seen.threads == [1]
    assert _blas_threads() >= 2  # and the limit ends with the fit


def test_train_bundle_runs_the_whole_training_on_one_blas_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        seen.append(_blas_threads())
        raise api.TrainError("stop here: the thread count is what this test reads")

    monkeypatch.setattr(api, "_train", record)
    with pytest.raises(api.TrainError, match="stop here"):
        api.train_bundle("heart", "static", tmp_path / "b", progress=False)
    assert seen == [1]
