"""adaptedge's trainer: datasets and sensor costs, the HPC, training methods, ONNX export,
the validation frontier and bundle export (``trainer.api.train_bundle`` ties them together).

The public API: ``from adaptedge.trainer import AdaptGbrtClassifier, DagClassifier,
train_bundle`` (every name in ``__all__``). The estimators follow scikit-learn's conventions (``fit(X, y)`` with string or
integer labels, ``Pipeline``, ``cross_val_score``). Names load on first use: modules import
their heavy dependencies (scikit-learn, skl2onnx) lazily, and ``trainer.data.datasets`` and
``trainer.policy.oracle`` need only numpy (+ onnxruntime) so devices can replay data.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AdaptGbrtClassifier": "adaptedge.trainer.methods.adapt_gbrt",
    "AdaptLinClassifier": "adaptedge.trainer.methods.adapt_lin",
    "CSCCClassifier": "adaptedge.trainer.methods.cstc.estimator",
    "CSTCClassifier": "adaptedge.trainer.methods.cstc.estimator",
    "CSTCRegressor": "adaptedge.trainer.methods.cstc.regressor",
    "ConfidenceCascade": "adaptedge.trainer.methods.baselines",
    "DagClassifier": "adaptedge.trainer.methods.dag.estimator",
    "GreedyMiser": "adaptedge.trainer.methods.greedy_miser",
    "GreedyMiserRegressor": "adaptedge.trainer.methods.greedy_miser_regression",
    "L1Baseline": "adaptedge.trainer.methods.baselines",
    "TrainError": "adaptedge.trainer.errors",
    "load_dataset": "adaptedge.trainer.data.datasets",
    "train_bundle": "adaptedge.trainer.api",
}

__all__ = [
    "AdaptGbrtClassifier",
    "AdaptLinClassifier",
    "CSCCClassifier",
    "CSTCClassifier",
    "CSTCRegressor",
    "ConfidenceCascade",
    "DagClassifier",
    "GreedyMiser",
    "GreedyMiserRegressor",
    "L1Baseline",
    "TrainError",
    "load_dataset",
    "train_bundle",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'adaptedge.trainer' has no attribute {name!r}; its public "
                             f"names are {__all__}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
