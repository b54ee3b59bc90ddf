"""ADAPT-GBRT's shared model + action head gives the per-point ONNX model's scores bit for bit.

Every threshold and margin weight of one fit exports the same bytes (``to_onnx_shared``); the
head applied to its ``action_basis`` equals the ``action_scores`` of the point's own model
(``to_onnx``), including rows exactly at the threshold (ties stop in both).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from adaptedge.protocol.action_head import BASIS_OUTPUT, apply_head
from adaptedge.protocol.onnx_contract import ACTION_OUTPUT, MODEL_INPUT, PROBA_OUTPUT
from adaptedge.trainer.methods.adapt_gbrt import AdaptGbrtClassifier


def _run(model: bytes, x: np.ndarray, outputs: list[str]) -> list[np.ndarray]:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in session.run(outputs, {MODEL_INPUT: x})]


@pytest.mark.parametrize("n_classes", [2, 3])
def test_shared_model_and_head_equal_each_points_model(n_classes: int) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4)).astype(np.float32)
    y = (np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.4, 0.4][: n_classes - 1])).astype(np.int64)
    P = np.eye(n_classes)[y] * 0.8 + 0.2 / n_classes
    model = AdaptGbrtClassifier(p_full=0.3, gamma=1e-3, n_rounds=2, n_trees=6,
                                random_state=0).fit(X[:1000], y[:1000], P[:1000])
    x = np.ascontiguousarray(X[1000:][:, list(model.node_columns())])
    raw = model.gate_raw(X[1000:])
    # thresholds at quantiles and exactly at gate values (ties: g == 0 after the threshold)
    thresholds = [*np.quantile(raw, [0.1, 0.5, 0.9]).tolist(), float(raw[0]), float(raw[7])]
    shared: set[bytes] = set()
    checked = ties = 0
    for t in thresholds:
        for w in (0.0, 0.5, 2.0):
            variant = model.with_threshold(t, w)
            own_scores, own_proba = _run(variant.to_onnx(), x, [ACTION_OUTPUT, PROBA_OUTPUT])
            data, head = variant.to_onnx_shared()
            shared.add(data)
            basis, proba = _run(data, x, [BASIS_OUTPUT, PROBA_OUTPUT])
            scores = apply_head(head, basis)
            assert scores.dtype == np.float32
            assert np.array_equal(scores, own_scores)
            assert np.array_equal(scores.argmax(axis=1), own_scores.argmax(axis=1))
            assert np.array_equal(proba, own_proba)
            ties += int((own_scores[:, 1] == 0).sum())
            checked += 1
    assert len(shared) == 1  # one file for every threshold and margin weight
    assert checked == 15 and ties > 0
