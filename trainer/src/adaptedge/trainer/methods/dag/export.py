"""The ONNX model of a DAG node: one fused graph per node.

Each node's graph is its classifier (``probabilities``) followed, when the node has several
actions, by its policy (linear, or the paper's filter tree) on ``[x, probabilities, top-1,
margin]`` (``action_scores``),
so the device makes one onnxruntime call per visited node. Classifiers are converted once
per sensor set and reused by every policy of a sweep.
"""

from __future__ import annotations

import weakref
from typing import ClassVar

import numpy as np
import onnx

from adaptedge.protocol.manifest import PROBA_OUTPUT
from adaptedge.trainer.export.fuse import fuse_node_model
from adaptedge.trainer.export.models import (
    filter_tree_policy_model,
    linear_to_onnx,
    ranked_policy_model,
)
from adaptedge.trainer.export.sklearn import sklearn_to_onnx
from adaptedge.trainer.methods.dag.bank import ClassifierBank, PriorModel
from adaptedge.trainer.methods.dag.filter_tree import FilterTreePolicy
from adaptedge.trainer.methods.dag.graph import TIE_BAND, LinearScores, NodePolicy
from adaptedge.trainer.methods.dag.problem import SensorSet


class OnnxCache:
    """Classifier ONNX graphs (``x`` -> ``probabilities``) by sensor set."""

    _of_bank: ClassVar[weakref.WeakKeyDictionary[ClassifierBank, OnnxCache]] = (
        weakref.WeakKeyDictionary())

    def __init__(self, bank: ClassifierBank) -> None:
        self.bank = bank
        self._models: dict[SensorSet, bytes] = {}

    @classmethod
    def of(cls, bank: ClassifierBank) -> OnnxCache:
        """The one cache of ``bank`` (every graph of a sweep shares its classifiers)."""
        if bank not in cls._of_bank:
            cls._of_bank[bank] = cls(bank)
        return cls._of_bank[bank]

    def classifier(self, sensors: SensorSet) -> onnx.ModelProto:
        if sensors not in self._models:
            entry = self.bank.get(sensors)
            n_classes = self.bank.problem.n_classes
            if isinstance(entry.model, PriorModel):
                proto = linear_to_onnx(np.zeros((0, n_classes)), np.log(entry.model.proba),
                                       output=PROBA_OUTPUT, transform="softmax")
            else:
                if len(entry.model.classes_) != n_classes:
                    raise ValueError(f"classifier for sensors {sensors} saw "
                                     f"{len(entry.model.classes_)} of {n_classes} classes in "
                                     "training: every class needs training examples")
                proto = sklearn_to_onnx(entry.model, len(entry.columns))
            self._models[sensors] = fuse_node_model(proto)
        return onnx.load_from_string(self._models[sensors])


def node_onnx(cache: OnnxCache, classifier: SensorSet, policy: NodePolicy | None) -> bytes:
    """The node's fused graph: ``classifier``'s model, then ``policy``'s action scores."""
    model = cache.classifier(classifier)
    n_classes = cache.bank.problem.n_classes
    if policy is None:
        data: bytes = model.SerializeToString()
        return data
    if isinstance(policy, FilterTreePolicy):
        m = len(policy.mu)
        scale = np.hstack([np.diag(1.0 / policy.sd), np.zeros((m, 1))])
        shift = np.append(-policy.mu / policy.sd, 1.0)
        return filter_tree_policy_model(model, scale, shift, policy.degree, policy.W, policy.b,
                                        policy.right, policy.left, n_classes, TIE_BAND)
    if not isinstance(policy, LinearScores):
        raise TypeError(f"no ONNX export for node policy {type(policy).__name__}")
    return ranked_policy_model(model, policy.W, policy.b, n_classes, TIE_BAND)
