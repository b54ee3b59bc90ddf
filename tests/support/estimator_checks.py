"""Shared checks every gate/LPC estimator passes (clone, refit, not-fitted, pickle, ONNX parity).

An estimator here: ``fit(X, y, hpc_proba)``, ``predict_proba(X)``, ``to_onnx() -> bytes`` and
the node's input columns as ``node_columns()`` or ``columns_``; gated models also have
``escalate(X)`` (True = escalate), which the ONNX ``action_scores`` must reproduce exactly.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from adaptedge.trainer.export.run import run_node

PROBA_TOL = 1e-5


@dataclass(frozen=True)
class Data:
    X_train: NDArray[np.float32]
    y_train: NDArray[np.int64]
    hpc_train: NDArray[np.float64]
    X_test: NDArray[np.float32]


def node_columns(est: Any) -> list[int]:
    cols = est.node_columns() if hasattr(est, "node_columns") else est.columns_
    return list(cols)


def routing(est: Any, X: NDArray[np.float32]) -> NDArray[np.bool_] | None:
    """Python escalation decisions, or None for a stop-only model."""
    if not hasattr(est, "escalate") or getattr(est, "p_full", 1.0) == 0.0:
        return None
    return np.asarray(est.escalate(X), dtype=bool)


def check_clone_params(est: Any) -> None:
    params = est.get_params()
    twin = clone(est)
    assert twin.get_params() == params
    assert twin is not est
    est.set_params(**params)
    assert est.get_params() == params


def check_not_fitted(est: Any, data: Data) -> None:
    for call in (lambda: est.predict_proba(data.X_test), lambda: est.to_onnx()):
        with pytest.raises(NotFittedError) as info:
            call()
        assert isinstance(info.value, ValueError) and isinstance(info.value, AttributeError)


def check_refit_identical(factory: Callable[[], Any], data: Data) -> None:
    a = factory().fit(data.X_train, data.y_train, data.hpc_train)
    b = factory().fit(data.X_train, data.y_train, data.hpc_train)
    np.testing.assert_array_equal(a.predict_proba(data.X_test), b.predict_proba(data.X_test))
    ra, rb = routing(a, data.X_test), routing(b, data.X_test)
    if ra is not None and rb is not None:
        np.testing.assert_array_equal(ra, rb)
    assert a.to_onnx() == b.to_onnx()


def check_pickle(fitted: Any, data: Data) -> None:
    back = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(back.predict_proba(data.X_test),
                                  fitted.predict_proba(data.X_test))


def check_onnx_parity(fitted: Any, data: Data) -> None:
    cols = node_columns(fitted)
    assert cols, "the fitted model reads no sensor; pick data/params that buy one"
    out = run_node(fitted.to_onnx(), data.X_test[:, cols])
    np.testing.assert_allclose(out["probabilities"], fitted.predict_proba(data.X_test),
                               atol=PROBA_TOL, rtol=0)
    expected = routing(fitted, data.X_test)
    if expected is None:
        assert "action_scores" not in out
        return
    scores = out["action_scores"]
    assert scores.shape == (len(data.X_test), 2)
    escalated = np.argmax(scores, axis=1) == 1  # first highest wins, as on the device
    assert np.array_equal(escalated, expected), (
        f"{int(np.sum(escalated != expected))} of {len(expected)} routing decisions differ")
