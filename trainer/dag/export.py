"""The ONNX model of a DAG node: one fused graph per node.

Each node's graph is its classifier (``probabilities``) followed, when the node has several
actions, by its linear policy on ``[x, probabilities, top-1, margin]`` (``action_scores``),
so the device makes one onnxruntime call per visited node. Classifiers are converted once
per sensor set and reused by every policy of a sweep.
"""

from __future__ import annotations

import weakref
from typing import ClassVar

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from adaptedge.protocol.manifest import ACTION_OUTPUT, MODEL_INPUT, PROBA_OUTPUT
from adaptedge.trainer.dag.bank import ClassifierBank, PriorModel
from adaptedge.trainer.dag.graph import TIE_BAND, LinearScores
from adaptedge.trainer.dag.problem import SensorSet
from adaptedge.trainer.onnx_export import (
    IR_VERSION,
    fuse_node_model,
    linear_to_onnx,
    sklearn_to_onnx,
)


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


def _append_policy(model: onnx.ModelProto, policy: LinearScores, n_classes: int) -> bytes:
    """Add the policy to a classifier graph: raw = [x, p, top1, margin] @ W + b, and
    ``action_scores[j] = (n - j) if raw[j] >= max(raw) - TIE_BAND else 0`` (first in band wins)."""
    graph = model.graph
    n_actions = policy.W.shape[1]
    k = min(2, n_classes)
    mix = np.zeros((k, 2), np.float32)
    mix[0, 0], mix[0, 1] = 1.0, 1.0
    if k == 2:
        mix[1, 1] = -1.0
    graph.initializer.extend([
        numpy_helper.from_array(np.array([k], np.int64), "a_k"),
        numpy_helper.from_array(mix, "a_mix"),
        numpy_helper.from_array(policy.W.astype(np.float32), "a_W"),
        numpy_helper.from_array(policy.b.astype(np.float32), "a_b"),
        numpy_helper.from_array(np.array(TIE_BAND, np.float32), "a_band"),
        numpy_helper.from_array(np.arange(n_actions, 0, -1).astype(np.float32), "a_rank")])
    graph.node.extend([
        helper.make_node("TopK", [PROBA_OUTPUT, "a_k"], ["a_top", "a_top_idx"], axis=1,
                         largest=1, sorted=1),
        helper.make_node("MatMul", ["a_top", "a_mix"], ["a_conf"]),
        helper.make_node("Concat", [MODEL_INPUT, PROBA_OUTPUT, "a_conf"], ["a_feats"], axis=1),
        helper.make_node("MatMul", ["a_feats", "a_W"], ["a_raw"]),
        helper.make_node("Add", ["a_raw", "a_b"], ["a_scores"]),
        helper.make_node("ReduceMax", ["a_scores"], ["a_max"], axes=[1], keepdims=1),
        helper.make_node("Sub", ["a_max", "a_band"], ["a_floor"]),
        helper.make_node("GreaterOrEqual", ["a_scores", "a_floor"], ["a_tied"]),
        helper.make_node("Cast", ["a_tied"], ["a_tied_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["a_tied_f", "a_rank"], [ACTION_OUTPUT])])
    graph.output.append(helper.make_tensor_value_info(
        ACTION_OUTPUT, TensorProto.FLOAT, ["N", policy.W.shape[1]]))
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data


def node_onnx(cache: OnnxCache, classifier: SensorSet, policy: LinearScores | None) -> bytes:
    """The node's fused graph: ``classifier``'s model, then ``policy``'s action scores."""
    model = cache.classifier(classifier)
    if policy is None:
        data: bytes = model.SerializeToString()
        return data
    return _append_policy(model, policy, cache.bank.problem.n_classes)
