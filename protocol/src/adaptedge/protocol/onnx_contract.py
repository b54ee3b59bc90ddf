"""The ONNX side of the model contract: the versions every bundled model is written at.

The tensor names of the contract (input ``x``, outputs ``probabilities`` and
``action_scores``) are defined with the manifest (``protocol.manifest``) and re-exported
here, so an exporter finds names and versions in one place. The versions are the ones the
oldest onnxruntime allowed by ``pyproject.toml`` (1.17) and today's (1.32) both load:
IR 9 (onnxruntime >= 1.15), default opset 17 and ``ai.onnx.ml`` opset 3. This module is
constants only: ``protocol`` never imports ``onnx``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from adaptedge.protocol.manifest import ACTION_OUTPUT, MODEL_INPUT, PROBA_OUTPUT, VALUE_OUTPUT

IR_VERSION = 9
"""The ``ModelProto.ir_version`` of every model the trainer writes."""
OPSET = 17
"""The default-domain (``ai.onnx``) opset."""
ML_DOMAIN = "ai.onnx.ml"
ML_OPSET = 3
"""The ``ai.onnx.ml`` opset (TreeEnsembleRegressor with ``nodes_missing_value_tracks_true``)."""
OPSETS: Mapping[str, int] = MappingProxyType({"": OPSET, ML_DOMAIN: ML_OPSET})
"""Domain -> opset version, as converters (skl2onnx ``target_opset``) take it."""

__all__ = [
    "ACTION_OUTPUT",
    "IR_VERSION",
    "ML_DOMAIN",
    "ML_OPSET",
    "MODEL_INPUT",
    "OPSET",
    "OPSETS",
    "PROBA_OUTPUT",
    "VALUE_OUTPUT",
]
