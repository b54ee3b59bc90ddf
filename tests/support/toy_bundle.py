"""Small hand-made bundles for tests: linear-softmax ONNX models built with ``trainer.export``.

Two policies: ``gate`` (one node holding sensors a+b, actions stop/escalate — ADAPT's shape)
and ``walk`` (root reads nothing; acquire a, then b, stop or escalate anywhere).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from adaptedge.protocol import (
    Action,
    CostWeights,
    HpcRef,
    LinkSpec,
    Manifest,
    ModelRef,
    OperatingPoint,
    PolicyGraph,
    PolicyNode,
    SensorSpec,
    write_bundle,
)
from adaptedge.trainer.export.models import linear_node_model

linear_model_bytes = linear_node_model
"""ONNX: probabilities = softmax(x W + b) [, action_scores = x A + c] (the toolkit's builder)."""

DEFAULT_DEADLINE_MS = LinkSpec().deadline_ms


def build_toy_bundle(out: Path, *, seed: int = 0, force: bool = False,
                     deadline_ms: float = DEFAULT_DEADLINE_MS) -> Manifest:
    """Three features from two sensors (a: 0,1; b: 2), two classes; returns the written manifest.

    ``deadline_ms`` is the escalation deadline the bundle gives its devices."""
    rng = np.random.default_rng(seed)
    def w(n_in: int, n_out: int) -> npt.NDArray[np.float32]:
        return rng.normal(size=(n_in, n_out)).astype(np.float32)
    def z(n: int) -> npt.NDArray[np.float32]:
        return rng.normal(size=n).astype(np.float32) * 0.1
    files = {
        "hpc.onnx": linear_model_bytes(w(3, 2), z(2)),
        "gate.onnx": linear_model_bytes(w(3, 2), z(2), w(3, 2), z(2)),
        "root.onnx": linear_model_bytes(np.zeros((0, 2), np.float32).reshape(0, 2), z(2)),
        "a.onnx": linear_model_bytes(w(2, 2), z(2), w(2, 3), z(3)),
        "ab.onnx": linear_model_bytes(w(3, 2), z(2), w(3, 2), z(2)),
    }
    gate = PolicyGraph(root="ab", nodes={
        "ab": PolicyNode(sensors=("a", "b"), model=ModelRef("gate.onnx", (0, 1, 2)),
                         actions=(Action("stop"), Action("escalate")))})
    walk = PolicyGraph(root="root", nodes={
        "root": PolicyNode(sensors=(), model=ModelRef("root.onnx", ()),
                           actions=(Action("acquire", "a", "a"),)),
        "a": PolicyNode(sensors=("a",), model=ModelRef("a.onnx", (0, 1)),
                        actions=(Action("stop"), Action("acquire", "b", "ab"), Action("escalate"))),
        "ab": PolicyNode(sensors=("a", "b"), model=ModelRef("ab.onnx", (0, 1, 2)),
                         actions=(Action("stop"), Action("escalate")))})
    manifest = Manifest(
        schema_version=1, bundle_id="pending", classes=("neg", "pos"),
        feature_names=("a0", "a1", "b0"),
        sensors=(SensorSpec("a", (0, 1), energy_mj=2.0, latency_ms=5.0),
                 SensorSpec("b", (2,), energy_mj=10.0, latency_ms=20.0, money=0.01)),
        link=LinkSpec(deadline_ms=deadline_ms), cost_weights=CostWeights(),
        hpc=HpcRef("hpc.onnx", ("a", "b"), accuracy=0.9, description="toy linear HPC"),
        policies={"gate": gate, "walk": walk},
        operating_points=(
            OperatingPoint("gate", "gate", accuracy=0.8, cost=12.0, escalation_rate=0.5),
            OperatingPoint("walk", "walk", accuracy=0.85, cost=8.0, escalation_rate=0.2,
                           avg_sensors_read=1.5, params={"lambda": 0.1}),
        ),
        default_operating_point="walk", files={}, metadata={"method": "toy"})
    return write_bundle(out, manifest, files, force=force)
