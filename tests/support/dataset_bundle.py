"""The one small bundle for a built-in dataset, built without the trainer: least-squares linear
models in hand-built ONNX, so edge and simulator tests replay data whose features match.

One policy ``gate`` with one node holding the first ``n_sensors`` sensors (default: all;
actions stop / escalate; the gate escalates about ``escalate`` of the validation rows) and an
HPC over every sensor. The operating point's accuracy and cost are measured on the validation split
(cost through ``protocol.costs``), so budget checks see real numbers.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol import (
    Action,
    HpcRef,
    Manifest,
    ModelRef,
    OperatingPoint,
    PolicyGraph,
    PolicyNode,
    write_bundle,
)
from adaptedge.protocol.costs import decision_cost
from tests.support.toy_bundle import linear_model_bytes

F32 = npt.NDArray[np.float32]


def least_squares_softmax(X: npt.NDArray[Any], y: npt.NDArray[Any],
                          n_classes: int) -> tuple[F32, F32]:
    """Weights and bias of a linear model fitted to +-4 one-hot targets on standardised X."""
    mean, std = X.mean(axis=0), X.std(axis=0) + 1e-6
    Z = np.hstack([(X - mean) / std, np.ones((len(X), 1))])
    coef, *_ = np.linalg.lstsq(Z, np.eye(n_classes)[y] * 8.0 - 4.0, rcond=None)
    W = coef[:-1] / std[:, None]
    b = coef[-1] - (mean / std) @ coef[:-1]
    return W.astype(np.float32), b.astype(np.float32)


def build_dataset_bundle(out: Path, dataset: str, *, n_sensors: int | None = None,
                         escalate: float = 0.3, seed: int = 0) -> Manifest:
    """Write the bundle for built-in ``dataset`` to ``out``; returns its manifest."""
    from adaptedge.trainer.data.datasets import load_dataset

    ds = load_dataset(dataset)
    k = len(ds.classes)
    node_sensors = ds.sensors[:n_sensors]
    cols = list(sorted(c for s in node_sensors for c in s.features))
    W_hpc, b_hpc = least_squares_softmax(ds.X_train, ds.y_train, k)
    W, b = least_squares_softmax(ds.X_train[:, cols], ds.y_train, k)
    A = np.zeros((len(cols), 2), np.float32)
    A[:, 1] = (np.random.default_rng(seed).normal(size=len(cols))
               / (ds.X_train[:, cols].std(0) + 1e-6))
    escalate_score = ds.X_val[:, cols] @ A[:, 1]
    c = np.asarray([0.0, -np.quantile(escalate_score, 1.0 - escalate)], np.float32)
    files = {"hpc.onnx": linear_model_bytes(W_hpc, b_hpc),
             "gate.onnx": linear_model_bytes(W, b, A, c)}
    node = PolicyNode(sensors=tuple(s.name for s in node_sensors),
                      model=ModelRef("gate.onnx", tuple(cols)),
                      actions=(Action("stop"), Action("escalate")))
    hpc_answers = np.argmax(ds.X_val @ W_hpc + b_hpc, axis=1)
    manifest = Manifest(
        schema_version=1, bundle_id="pending", classes=ds.classes,
        feature_names=ds.feature_names, sensors=ds.sensors, link=ds.link,
        cost_weights=ds.cost_weights,
        hpc=HpcRef("hpc.onnx", tuple(s.name for s in ds.sensors),
                   accuracy=float(np.mean(hpc_answers == ds.y_val)),
                   description="least-squares linear HPC (tests/support/dataset_bundle.py)"),
        policies={"gate": PolicyGraph(root="n0", nodes={"n0": node})},
        operating_points=(), default_operating_point="gate", files={},
        metadata={"method": "linear-least-squares", "dataset": dataset})
    escalated = escalate_score + c[1] > 0.0
    answers = np.where(escalated, hpc_answers,
                       np.argmax(ds.X_val[:, cols] @ W + b, axis=1))
    rate = float(escalated.mean())
    cost = ((1.0 - rate) * decision_cost(manifest, node.sensors, False).scalar
            + rate * decision_cost(manifest, manifest.hpc.sensors, True).scalar)
    point = OperatingPoint("gate", "gate", accuracy=float(np.mean(answers == ds.y_val)),
                           cost=cost, escalation_rate=rate,
                           avg_sensors_read=(1.0 - rate) * len(node.sensors)
                           + rate * len(manifest.hpc.sensors))
    return write_bundle(out, replace(manifest, operating_points=(point,)), files)
