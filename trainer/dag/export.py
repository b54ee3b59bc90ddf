"""Export a ``TrainedGraph`` as a ``PolicyExport``: one fused ONNX graph per node.

Each node's graph is its classifier (``probabilities``) followed, when the node has several
actions, by its linear policy on ``[x, probabilities, top-1, margin]`` (``action_scores``),
so the device makes one onnxruntime call per visited node. Classifiers are converted once
per sensor set and reused by every policy of a sweep.
"""

from __future__ import annotations

import numpy as np
import onnx

from adaptedge.protocol.manifest import PROBA_OUTPUT, Action
from adaptedge.trainer.dag.bank import ClassifierBank, PriorModel
from adaptedge.trainer.dag.graph import TIE_BAND, TrainedGraph, WalkNode
from adaptedge.trainer.dag.problem import SensorSet
from adaptedge.trainer.export.fuse import fuse_node_model
from adaptedge.trainer.export.models import linear_to_onnx, ranked_policy_model
from adaptedge.trainer.export.sklearn import sklearn_to_onnx
from adaptedge.trainer.policy import Metrics, NodeExport, PolicyExport


class OnnxCache:
    """Classifier ONNX graphs (``x`` -> ``probabilities``) by sensor set."""

    def __init__(self, bank: ClassifierBank) -> None:
        self.bank = bank
        self._models: dict[SensorSet, bytes] = {}

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


def node_onnx(cache: OnnxCache, node: WalkNode) -> bytes:
    model = cache.classifier(node.classifier)
    if node.policy is None:
        data: bytes = model.SerializeToString()
        return data
    return ranked_policy_model(model, node.policy.W, node.policy.b,
                               cache.bank.problem.n_classes, TIE_BAND)


def to_policy_export(graph: TrainedGraph, cache: OnnxCache, *, name: str, method: str,
                     validation: Metrics) -> PolicyExport:
    problem = cache.bank.problem
    nodes: dict[str, NodeExport] = {}
    for nid, node in graph.nodes.items():
        actions = tuple(
            Action("acquire", problem.sensors[a.sensor].name, a.next)
            if a.kind == "acquire" and a.sensor is not None else Action(a.kind)
            for a in node.actions)
        nodes[nid] = NodeExport(sensors=problem.sensor_names(node.sensors),
                                inputs=problem.columns(node.classifier),
                                onnx_model=node_onnx(cache, node), actions=actions)
    return PolicyExport(name=name, root=graph.root, nodes=nodes, validation=validation,
                        params=dict(graph.params), method=method)
