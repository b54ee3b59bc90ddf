"""LightGBM's dumped trees as ``TreeArrays``: missing values go where LightGBM sends them (in
the trainer's logits and in the exported ONNX), and splits with no ``BRANCH_LEQ`` form are
refused in one line."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from adaptedge.trainer.errors import ExportError
from adaptedge.trainer.export.lightgbm_trees import flatten_tree, lightgbm_trees
from adaptedge.trainer.methods.cart import LEAF_QUANTUM
from adaptedge.trainer.methods.cegb_model import BoostSettings, Penalties, fit_cegb


def _rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    y = ((X[:, 0] + X[:, 1] * X[:, 2] > 0.2) ^ (X[:, 3] > 1.0)).astype(np.int64)
    return X, y


def test_missing_values_route_as_in_lightgbm() -> None:
    """Feature 0 has NaN in training (NaN takes the split's default side), the others none
    (LightGBM reads a NaN there as 0.0): on rows full of NaN the converted trees, in Python and
    in onnxruntime, give LightGBM's raw scores up to the leaf rounding."""
    X, y = _rows(1500, 0)
    X[np.random.default_rng(1).random(1500) < 0.2, 0] = np.nan
    model = fit_cegb(X[:1000], y[:1000], X[1000:], y[1000:], 2, np.arange(4), np.ones(4),
                     Penalties(0.0, 0.0), BoostSettings(n_rounds=30, patience=30))
    kinds = {n.get("missing_type") for t in model.booster.dump_model()["tree_info"]
             for n in _splits(t["tree_structure"])}
    assert kinds == {"NaN", "None"}
    T, _ = _rows(400, 2)
    T[np.random.default_rng(3).random(T.shape) < 0.3] = np.nan
    raw = model.booster.predict(T, num_iteration=model.rounds, raw_score=True)
    tolerance = len(model.trees) * LEAF_QUANTUM / 2
    np.testing.assert_allclose(model.decision_logits(T)[:, 0], raw, rtol=0, atol=tolerance)
    session = ort.InferenceSession(model.to_onnx(), providers=["CPUExecutionProvider"])
    (proba,) = session.run(["probabilities"], {"x": T})
    assert ((proba[:, 1] > 0.5) == (raw > 0)).all()


def _splits(node: dict[str, Any]) -> list[dict[str, Any]]:
    if "split_feature" not in node:
        return []
    return [node, *_splits(node["left_child"]), *_splits(node["right_child"])]


def _stump(**split: Any) -> dict[str, Any]:
    return {"split_feature": 1, "threshold": 0.5, "decision_type": "<=", "default_left": True,
            "missing_type": "None", "left_child": {"leaf_value": -1.0},
            "right_child": {"split_feature": 0, "threshold": -2.0, "decision_type": "<=",
                            "default_left": False, "missing_type": "NaN",
                            "left_child": {"leaf_value": 2.0},
                            "right_child": {"leaf_value": 3.0}}, **split}


def test_a_dumped_tree_flattens_in_pre_order() -> None:
    tree = flatten_tree(_stump())
    assert tree.feature.tolist() == [1, -1, 0, -1, -1]
    assert tree.left.tolist() == [1, -1, 3, -1, -1]
    assert tree.right.tolist() == [2, -1, 4, -1, -1]
    assert tree.value.tolist() == [0.0, -1.0, 0.0, 2.0, 3.0]
    assert tree.missing_left is not None
    assert tree.missing_left.tolist() == [True, False, False, False, False]  # None: 0 <= 0.5
    dump = {"num_tree_per_iteration": 3, "tree_info": [{"tree_structure": _stump()}] * 7}
    assert [k for _, k in lightgbm_trees(dump, 2)] == [0, 1, 2, 0, 1, 2]


@pytest.mark.parametrize(("split", "words"), [({"decision_type": "=="}, "categorical"),
                                              ({"missing_type": "Zero"}, "zero_as_missing")])
def test_splits_without_a_leq_form_are_refused(split: dict[str, Any], words: str) -> None:
    with pytest.raises(ExportError, match=words):
        flatten_tree(_stump(**split), 4)
