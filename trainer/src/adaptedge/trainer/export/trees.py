"""The one tree-ensemble emitter and the one float32 threshold rounding.

Every tree model (ADAPT-GBRT's and Greedy Miser's CART trees, scikit-learn forests and
histogram boosting, hand-built test trees) becomes one ai.onnx.ml ``TreeEnsembleRegressor``
written by ``tree_ensemble``. Thresholds go through ``float32_thresholds``, so a float32 input
is routed exactly as the float64 (or float32) Python tree routes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
import onnx

from adaptedge.protocol.onnx_contract import ML_DOMAIN, MODEL_INPUT
from adaptedge.trainer.export.graph import GraphBuilder

SplitMode = Literal["BRANCH_LEQ", "BRANCH_LT"]
_ATTRS = ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
          "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
          "target_treeids", "target_nodeids", "target_ids", "target_weights")


class TreeLike(Protocol):
    """One regression tree as flat arrays over its nodes (node 0 is the root): ``feature``
    (-1 at a leaf), ``threshold``, ``left``/``right`` children and leaf ``value``
    ([n_nodes, k] or [n_nodes]). ``trainer.methods.cart.Tree`` and ``TreeArrays`` are trees."""

    @property
    def feature(self) -> npt.NDArray[Any]: ...
    @property
    def threshold(self) -> npt.NDArray[Any]: ...
    @property
    def left(self) -> npt.NDArray[Any]: ...
    @property
    def right(self) -> npt.NDArray[Any]: ...
    @property
    def value(self) -> npt.NDArray[Any]: ...


@dataclass(frozen=True)
class TreeArrays:
    """A ``TreeLike`` built outside the trainer's CART (scikit-learn, tests).

    A row goes to ``left[i]`` when ``x[feature] <= threshold[i]`` (``BRANCH_LEQ``; ``<`` with
    ``BRANCH_LT``), else to ``right[i]``. Thresholds are float64 as Python decided; the
    emitter rounds them safely to float32. NaN inputs go right unless ``missing_left[i]``.
    """

    feature: npt.NDArray[np.int64]
    threshold: npt.NDArray[np.float64]
    left: npt.NDArray[np.int64]
    right: npt.NDArray[np.int64]
    value: npt.NDArray[np.float64]
    missing_left: npt.NDArray[np.bool_] | None = None


def float32_thresholds(thresholds: npt.ArrayLike, mode: SplitMode = "BRANCH_LEQ"
                       ) -> npt.NDArray[np.float32]:
    """float32 thresholds that make the runtime decide exactly as float64 Python does.

    For every float32 input ``x``: ``x <= t64`` iff ``x <= t32`` (LEQ: ``t32`` is ``t64``
    rounded toward -inf), and ``x < t64`` iff ``x < t32`` (LT: rounded toward +inf).
    Plain ``astype(float32)`` rounds to nearest, which flips inputs between the two.
    Thresholds that are float32 already are kept as they are.
    """
    t64 = np.asarray(thresholds, dtype=np.float64)
    with np.errstate(over="ignore"):
        t32 = t64.astype(np.float32)
    if mode == "BRANCH_LEQ":
        fix = t32.astype(np.float64) > t64
        t32[fix] = np.nextafter(t32[fix], np.float32(-np.inf))
    elif mode == "BRANCH_LT":
        fix = t32.astype(np.float64) < t64
        t32[fix] = np.nextafter(t32[fix], np.float32(np.inf))
    else:
        raise ValueError(f"mode must be BRANCH_LEQ or BRANCH_LT, got {mode!r}")
    return t32


def _positions(feature: npt.NDArray[np.int64], leaf: npt.NDArray[np.bool_],
               position: Mapping[int, int] | None) -> npt.NDArray[np.int64]:
    """Input positions of the split features (0 at leaves)."""
    if position is None:
        return np.where(leaf, 0, feature)
    return np.array([0 if is_leaf else position[int(f)] for f, is_leaf in zip(feature, leaf,
                                                                             strict=True)],
                    dtype=np.int64)


def _add_tree(parts: dict[str, list[Any]], t: int, tree: TreeLike, first: int, n_targets: int,
              n_inputs: int, position: Mapping[int, int] | None, mode: SplitMode,
              keep_zeros: bool = False) -> npt.NDArray[np.bool_]:
    """Append tree ``t``'s attribute columns; its leaf values go to targets ``first..``.
    Zero leaf values are left out unless ``keep_zeros`` (pure leaves of a many-class forest
    are mostly zeros). Returns the targets that every leaf of the tree names."""
    feature = np.asarray(tree.feature, dtype=np.int64)
    n = len(feature)
    leaf = feature < 0
    values = np.asarray(tree.value, dtype=np.float64).reshape(n, -1)
    k = values.shape[1]
    if first < 0 or first + k > n_targets:
        raise ValueError(f"tree {t} writes targets {first}..{first + k - 1}, but the ensemble "
                         f"has {n_targets}")
    split_on = _positions(feature, leaf, position)
    bad = np.flatnonzero(~leaf & (split_on >= n_inputs))
    if bad.size:
        raise ValueError(f"tree {t} node {bad[0]} splits on column {split_on[bad[0]]}, but "
                         f"the model has {n_inputs} inputs")
    missing = tree.missing_left if isinstance(tree, TreeArrays) else None
    leaves = np.flatnonzero(leaf)
    parts["nodes_treeids"].append(np.full(n, t))
    parts["nodes_nodeids"].append(np.arange(n))
    parts["nodes_featureids"].append(split_on)
    parts["nodes_values"].append(np.where(leaf, np.float32(0),
                                          float32_thresholds(tree.threshold, mode)))
    parts["nodes_modes"].append(np.where(leaf, b"LEAF", mode.encode()))
    parts["nodes_truenodeids"].append(np.where(leaf, 0, tree.left))
    parts["nodes_falsenodeids"].append(np.where(leaf, 0, tree.right))
    parts["nodes_missing_value_tracks_true"].append(
        np.where(leaf, 0, np.zeros(n, bool) if missing is None else missing).astype(int))
    keep = np.full(len(leaves) * k, True) if keep_zeros else values[leaves].ravel() != 0.0
    parts["target_treeids"].append(np.full(int(keep.sum()), t))
    parts["target_nodeids"].append(np.repeat(leaves, k)[keep])
    parts["target_ids"].append(first + np.tile(np.arange(k), len(leaves))[keep])
    parts["target_weights"].append(values[leaves].ravel()[keep])
    covered = np.zeros(n_targets, bool)
    covered[first:first + k] = keep.reshape(len(leaves), k).all(axis=0)
    return covered


def _zero_leaf(n_targets: int) -> TreeArrays:
    return TreeArrays(np.array([-1]), np.zeros(1), np.array([-1]), np.array([-1]),
                      np.zeros((1, n_targets)))


def tree_ensemble(b: GraphBuilder, trees: Sequence[tuple[TreeLike, int]], n_targets: int,
                  base_values: npt.ArrayLike | None = None, *, output: str,
                  feature_position: Mapping[int, int] | None = None,
                  mode: SplitMode = "BRANCH_LEQ", base_is_final: bool = True) -> None:
    """Append ``output`` [N, n_targets] = ``base_values`` + the sum of the trees' leaf values.

    ``trees`` are (tree, first target): a tree with k values per leaf writes targets
    first..first+k-1. ``feature_position`` maps a tree's feature ids to columns of ``x``
    (default: the ids are the columns). Zero trees give the constant ``base_values``.
    ``nodes_missing_value_tracks_true`` is written only when some node sends a missing
    value to its true branch: all zeros is the operator's default (and 6% of the bytes).

    onnxruntime adds a target's base value only in rows where a reached leaf names that
    target: when a non-zero base value could be dropped so, a last tree of one leaf names
    every target with weight 0. Pass ``base_is_final=False`` if the caller rewrites the
    node's ``base_values`` later (then any base value counts as non-zero).
    """
    base = (np.zeros(n_targets) if base_values is None
            else np.asarray(base_values, dtype=np.float64).reshape(n_targets))
    parts: dict[str, list[Any]] = {k: [] for k in _ATTRS}
    covered = np.zeros(n_targets, bool)
    for t, (tree, first) in enumerate(trees):
        covered |= _add_tree(parts, t, tree, first, n_targets, b.n_inputs, feature_position,
                             mode)
    named_none = not any(len(ids) for ids in parts["target_ids"])  # every leaf was 0
    if not trees or named_none or np.any(((base != 0) | (not base_is_final)) & ~covered):
        _add_tree(parts, len(trees), _zero_leaf(n_targets), 0, n_targets, b.n_inputs, None,
                  mode, keep_zeros=True)
    attrs = {k: np.concatenate(v) for k, v in parts.items()}  # GraphBuilder.add: arrays
    if not attrs["nodes_missing_value_tracks_true"].any():  # the operator's default: omitted
        del attrs["nodes_missing_value_tracks_true"]
    b.add("TreeEnsembleRegressor", [MODEL_INPUT], [output], domain=ML_DOMAIN,
          n_targets=n_targets, aggregate_function="SUM", post_transform="NONE",
          base_values=[float(v) for v in base], **attrs)


def tree_core(trees: Sequence[tuple[TreeLike, int]], base_values: npt.ArrayLike,
              feature_position: Mapping[int, int]) -> list[onnx.NodeProto]:
    """The node computing a node model's ``core`` [N, len(base_values)] (see ``models``);
    its ``base_values`` attribute may be rewritten afterwards."""
    b = GraphBuilder(len(feature_position))
    base = np.asarray(base_values, dtype=np.float64).ravel()
    tree_ensemble(b, trees, len(base), base, output="core", feature_position=feature_position,
                  base_is_final=False)
    return b.nodes
