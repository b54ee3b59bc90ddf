"""A CSTC/CSCC node on boosted-tree features, as one ai.onnx.ml ``TreeEnsembleRegressor``.

Node ``k`` scores ``z = phi(x) W + b`` with ``phi`` the boosted trees' outputs: the sum over
its trees ``t`` of ``h_t(x) W_t`` is itself a tree ensemble whose leaves hold ``value_t W_t``
(one target per logit). A routing node adds the routing score ``s = z v - theta`` as one more
target, stored negated so that the ``gate`` head's ``[-g, g]`` is ``[s, -s]``: route to
``hi`` first, as ``s >= 0`` routes up in training. Leaf values and base values are rounded to
``cart.LEAF_QUANTUM``, so onnxruntime's float32 sums equal this module's float64 sums exactly
(below 2**7) and the exported node decides as the float64 walk does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from adaptedge.trainer.export.models import node_model
from adaptedge.trainer.export.trees import tree_core
from adaptedge.trainer.methods.cart import Tree, quantize
from adaptedge.trainer.methods.cstc.estimator import proba_from_logits
from adaptedge.trainer.methods.cstc.objective import FloatArray
from adaptedge.trainer.methods.cstc.optimise import CostSensitiveModel


def confidence_scores(z: FloatArray, threshold: float) -> FloatArray:
    """(stop, escalate) scores ``[c, -c]``: ``c = |z| - logit(threshold)`` for one logit, the
    top probability minus ``threshold`` otherwise (the ``confidence`` head)."""
    if z.shape[1] == 1:
        c = np.abs(z[:, 0]) - np.log(threshold / (1 - threshold))
    else:
        c = proba_from_logits(z).max(axis=1) - threshold
    return np.column_stack([c, -c])


@dataclass(frozen=True)
class TreeNode:
    """``z = b + sum of trees`` on the node's input columns; routing ``[s, -s]``, confidence or
    nothing. Every tree's leaves hold ``n_logits`` (+1: ``-s`` for a routing node) values."""

    trees: tuple[Tree, ...]
    """Features remapped to input positions; leaf values on the quantum grid."""
    base: FloatArray
    """[n_logits (+1)] on the quantum grid."""
    n_inputs: int
    routes: bool = False
    threshold: float | None = None

    @property
    def n_logits(self) -> int:
        return len(self.base) - (1 if self.routes else 0)

    def core(self, X: NDArray[np.floating]) -> FloatArray:
        X32 = np.asarray(X, dtype=np.float32)
        out = np.tile(self.base, (len(X32), 1))
        for tree in self.trees:
            out += tree.predict(X32)
        return out

    def proba(self, X: NDArray[np.floating]) -> FloatArray:
        return proba_from_logits(self.core(X)[:, :self.n_logits])

    def action_scores(self, X: NDArray[np.floating]) -> FloatArray | None:
        core = self.core(X)
        if self.routes:
            s = -core[:, self.n_logits]
            return np.column_stack([s, -s])
        if self.threshold is not None:
            return confidence_scores(core[:, :self.n_logits], self.threshold)
        return None

    def to_onnx(self) -> bytes:
        n_classes = 2 if self.n_logits == 1 else self.n_logits
        nodes = tree_core([(tree, 0) for tree in self.trees], self.base,
                          {i: i for i in range(self.n_inputs)})
        if self.routes:
            return node_model(nodes, [], self.n_inputs, n_classes, "gate")
        if self.threshold is None:
            return node_model(nodes, [], self.n_inputs, n_classes, "stop")
        t = (float(np.log(self.threshold / (1 - self.threshold))) if self.n_logits == 1
             else self.threshold)
        return node_model(nodes, [], self.n_inputs, n_classes, "confidence",
                          confidence_threshold=t)


def tree_node(model: CostSensitiveModel, k: int, inputs: tuple[int, ...], routes: bool,
              threshold: float | None) -> tuple[TreeNode, int]:
    """Node ``k`` of a boosted model as a ``TreeNode`` reading columns ``inputs``, and the
    number of trees it evaluates."""
    features = model.features
    assert features is not None
    position = {col: i for i, col in enumerate(inputs)}
    K = features.n_outputs
    W = model.W[k]
    head = np.column_stack([W, -(W @ model.v[k])]) if routes else W
    base = np.append(model.b[k], -(model.b[k] @ model.v[k] - model.theta[k])) if routes \
        else model.b[k]
    trees = []
    used = features.node_trees(W)
    for t in used:
        tree = features.trees[t]
        feature = np.array([position[int(f)] if f >= 0 else -1 for f in tree.feature],
                           dtype=np.intp)
        values = quantize(tree.value @ head[t * K:(t + 1) * K])
        trees.append(replace(tree, feature=feature, value=values, gain=None))
    return TreeNode(tuple(trees), quantize(base), len(inputs), routes, threshold), len(used)
