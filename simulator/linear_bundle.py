"""A small bundle built without training a method: least-squares linear models in ONNX.

One policy node holding the first ``n_sensors`` sensors of a dataset (actions stop /
escalate; a linear gate set to escalate about ``escalate`` of the test rows) and an HPC over
every sensor. It is what ``adaptedge demo`` falls back to when ``trainer.api`` is missing,
and what simulator tests use for an ``adaptedge edge run`` device (which replays built-in
datasets). The models come from the trainer's ONNX toolkit (``trainer.export``), so this
needs ``onnx`` (the ``train`` extra).
"""

from __future__ import annotations

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

F32 = npt.NDArray[np.float32]


def _fit(X: npt.NDArray[Any], y: npt.NDArray[Any], n_classes: int) -> tuple[F32, F32]:
    mean, std = X.mean(axis=0), X.std(axis=0) + 1e-6
    Z = np.hstack([(X - mean) / std, np.ones((len(X), 1))])
    T = np.eye(n_classes)[y] * 8.0 - 4.0
    coef, *_ = np.linalg.lstsq(Z, T, rcond=None)
    W = coef[:-1] / std[:, None]
    b = coef[-1] - (mean / std) @ coef[:-1]
    return W.astype(np.float32), b.astype(np.float32)


def build_linear_bundle(out: Path, data: str, *, n_sensors: int = 4, escalate: float = 0.3,
                        seed: int = 0) -> Manifest:
    """Write the bundle for built-in dataset ``data`` to ``out``; returns its manifest."""
    from adaptedge.trainer.datasets import load_dataset
    from adaptedge.trainer.export.models import linear_node_model

    ds = load_dataset(data)
    k = len(ds.classes)
    node_sensors = ds.sensors[:n_sensors]
    cols = tuple(sorted(c for s in node_sensors for c in s.features))
    W_hpc, b_hpc = _fit(ds.X_train, ds.y_train, k)
    W, b = _fit(ds.X_train[:, cols], ds.y_train, k)
    rng = np.random.default_rng(seed)
    A = np.zeros((len(cols), 2), np.float32)
    A[:, 1] = rng.normal(size=len(cols)) / (ds.X_train[:, cols].std(0) + 1e-6)
    score = ds.X_val[:, cols] @ A[:, 1]
    c = np.asarray([0.0, -np.quantile(score, 1.0 - escalate)], np.float32)
    files = {"hpc.onnx": linear_node_model(W_hpc, b_hpc),
             "gate.onnx": linear_node_model(W, b, A, c)}
    node = PolicyNode(sensors=tuple(s.name for s in node_sensors),
                      model=ModelRef("gate.onnx", cols),
                      actions=(Action("stop"), Action("escalate")))
    manifest = Manifest(
        schema_version=1, bundle_id="pending", classes=ds.classes,
        feature_names=ds.feature_names, sensors=ds.sensors, link=ds.link,
        cost_weights=ds.cost_weights,
        hpc=HpcRef("hpc.onnx", tuple(s.name for s in ds.sensors), accuracy=0.0,
                   description="least-squares linear HPC (simulator.linear_bundle)"),
        policies={"gate": PolicyGraph(root="n0", nodes={"n0": node})},
        operating_points=(OperatingPoint("gate", "gate", accuracy=0.0, cost=0.0,
                                         escalation_rate=escalate),),
        default_operating_point="gate", files={},
        metadata={"method": "linear-least-squares", "dataset": data})
    return write_bundle(out, manifest, files)
