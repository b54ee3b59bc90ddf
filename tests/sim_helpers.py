"""A small bundle for a built-in dataset, without the trainer: least-squares linear models
in hand-built ONNX (``toy_bundle.linear_model_bytes``). One node holding the first few
sensors (stop / escalate, a linear gate tuned to escalate about ``escalate`` of the test rows)
and an HPC over every sensor. For simulator tests that need an ``adaptedge edge run`` device,
which replays built-in datasets only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
from toy_bundle import linear_model_bytes

from protocol import (
    Action,
    HpcRef,
    Manifest,
    ModelRef,
    OperatingPoint,
    PolicyGraph,
    PolicyNode,
    write_bundle,
)
from trainer.datasets import load_dataset


def _fit(X: npt.NDArray[np.floating], y: npt.NDArray[np.integer], n_classes: int
         ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    mean, std = X.mean(axis=0), X.std(axis=0) + 1e-6
    Z = np.hstack([(X - mean) / std, np.ones((len(X), 1))])
    T = np.eye(n_classes)[y] * 8.0 - 4.0
    coef, *_ = np.linalg.lstsq(Z, T, rcond=None)
    W = coef[:-1] / std[:, None]
    b = coef[-1] - (mean / std) @ coef[:-1]
    return W.astype(np.float32), b.astype(np.float32)


def build_dataset_bundle(out: Path, data: str, *, n_sensors: int = 4, escalate: float = 0.3,
                         seed: int = 0) -> Manifest:
    ds = load_dataset(data)
    k = len(ds.classes)
    node_sensors = ds.sensors[:n_sensors]
    cols = tuple(sorted(c for s in node_sensors for c in s.features))
    W_hpc, b_hpc = _fit(ds.X_train, ds.y_train, k)
    W, b = _fit(ds.X_train[:, cols], ds.y_train, k)
    rng = np.random.default_rng(seed)
    A = np.zeros((len(cols), 2), np.float32)
    A[:, 1] = rng.normal(size=len(cols)).astype(np.float32) / (ds.X_train[:, cols].std(0) + 1e-6)
    score = ds.X_test[:, cols] @ A[:, 1]
    c = np.asarray([0.0, -np.quantile(score, 1.0 - escalate)], np.float32)
    files = {"hpc.onnx": linear_model_bytes(W_hpc, b_hpc),
             "gate.onnx": linear_model_bytes(W, b, A, c)}
    node = PolicyNode(sensors=tuple(s.name for s in node_sensors), model=ModelRef("gate.onnx", cols),
                      actions=(Action("stop"), Action("escalate")))
    manifest = Manifest(
        schema_version=1, bundle_id="pending", classes=ds.classes, feature_names=ds.feature_names,
        sensors=ds.sensors, link=ds.link, cost_weights=ds.cost_weights,
        hpc=HpcRef("hpc.onnx", tuple(s.name for s in ds.sensors), accuracy=0.0,
                   description="least-squares linear HPC (test helper)"),
        policies={"gate": PolicyGraph(root="n0", nodes={"n0": node})},
        operating_points=(OperatingPoint("gate", "gate", accuracy=0.0, cost=0.0,
                                         escalation_rate=escalate),),
        default_operating_point="gate", files={}, metadata={"method": "sim-test-linear",
                                                            "dataset": data})
    return write_bundle(out, manifest, files)
