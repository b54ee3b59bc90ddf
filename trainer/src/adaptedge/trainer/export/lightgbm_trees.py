"""LightGBM's trees (``Booster.dump_model()``) as the trainer's ``TreeArrays``.

The dump is plain JSON-like data, so this module imports nothing of LightGBM and the exported
ONNX (one ``TreeEnsembleRegressor``, ``export.trees``) needs nothing of it on the device.
A numerical split sends a row left when ``x <= threshold`` (float64, as LightGBM compares);
``float32_thresholds`` later makes float32 inputs route identically. Missing values follow
LightGBM: with ``missing_type`` ``NaN`` a NaN takes the split's default side, with ``None`` it
is read as 0.0. Categorical splits and ``missing_type`` ``Zero`` (``zero_as_missing``) have
no ``BRANCH_LEQ`` form and are refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from adaptedge.trainer.errors import ExportError
from adaptedge.trainer.export.trees import TreeArrays


def lightgbm_trees(dump: Mapping[str, Any], n_iterations: int | None = None
                   ) -> list[tuple[TreeArrays, int]]:
    """The first ``n_iterations`` boosting rounds (default: all) of a ``dump_model()`` dict as
    (tree, target) pairs: with ``k = num_tree_per_iteration`` trees per round, tree ``i``
    adds its leaf value to raw score ``i % k`` (one score for binary, one per class)."""
    k = int(dump.get("num_tree_per_iteration", 1))
    infos: Sequence[Mapping[str, Any]] = dump["tree_info"]
    if n_iterations is not None:
        infos = infos[: n_iterations * k]
    return [(flatten_tree(info["tree_structure"], i), i % k) for i, info in enumerate(infos)]


def flatten_tree(root: Mapping[str, Any], tree_index: int = 0) -> TreeArrays:
    """One dumped tree as flat node arrays, node 0 the root (pre-order, left before right)."""
    feature: list[int] = []
    threshold: list[float] = []
    left: list[int] = []
    right: list[int] = []
    value: list[float] = []
    missing_left: list[bool] = []
    parents: list[tuple[Mapping[str, Any], int, bool]] = [(root, -1, False)]
    while parents:
        node, parent, is_left = parents.pop()
        i = len(feature)
        if parent >= 0:
            (left if is_left else right)[parent] = i
        if "split_feature" not in node:
            feature.append(-1)
            threshold.append(0.0)
            value.append(float(node["leaf_value"]))
            missing_left.append(False)
            left.append(-1)
            right.append(-1)
            continue
        t = _numerical_threshold(node, tree_index)
        feature.append(int(node["split_feature"]))
        threshold.append(t)
        value.append(0.0)
        missing_left.append(_missing_goes_left(node, t, tree_index))
        left.append(-1)
        right.append(-1)
        parents.append((node["right_child"], i, False))
        parents.append((node["left_child"], i, True))
    return TreeArrays(feature=np.array(feature, np.int64),
                      threshold=np.array(threshold, np.float64),
                      left=np.array(left, np.int64), right=np.array(right, np.int64),
                      value=np.array(value, np.float64),
                      missing_left=np.array(missing_left, bool))


def _numerical_threshold(node: Mapping[str, Any], tree_index: int) -> float:
    if node.get("decision_type", "<=") != "<=":
        raise ExportError(f"LightGBM tree {tree_index} has a {node.get('decision_type')!r} "
                          f"(categorical) split, which the ONNX tree export cannot express: "
                          f"train without categorical_feature")
    return float(node["threshold"])


def _missing_goes_left(node: Mapping[str, Any], threshold: float, tree_index: int) -> bool:
    kind = str(node.get("missing_type", "None"))
    if kind == "NaN":
        return bool(node["default_left"])
    if kind == "None":
        return threshold >= 0.0  # LightGBM reads NaN as 0.0 here
    raise ExportError(f"LightGBM tree {tree_index} treats zeros as missing "
                      f"(missing_type {kind!r}), which the ONNX tree export cannot express: "
                      f"train with zero_as_missing=false")
