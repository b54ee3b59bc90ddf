"""The registered sweeps: every exported policy's ONNX reproduces its validation metrics."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from adaptedge.trainer.export.run import run_node
from adaptedge.trainer.gating import CostModel
from adaptedge.trainer.methods import MethodOptions, get_method
from adaptedge.trainer.synthetic import synthetic_2


def _oracle(y: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pred = np.where(rng.random(len(y)) < 0.97, y, 1 - y)
    return np.eye(2)[pred] * 0.9 + 0.05


@pytest.mark.parametrize("method", ["adapt-gbrt", "adapt-lin", "l1", "greedy-miser",
                                    "confidence"])
def test_exported_policies_match_their_validation_metrics(method: str) -> None:
    d = synthetic_2(n=1000)
    hpc = SimpleNamespace(oof_proba_train=_oracle(d.y_train, 0),
                          proba_val=_oracle(d.y_val, 1), sensors=("x1", "x2"))
    policies = get_method(method)(d, hpc, MethodOptions(quick=True, progress=False))
    assert policies
    cm = CostModel.build(d.sensors, d.cost_weights, d.link, d.n_features, hpc.sensors)
    for policy in policies:
        assert policy.method == method
        node = policy.nodes[policy.root]
        out = run_node(node.onnx_model, d.X_val[:, list(node.inputs)])
        escalate = (np.argmax(out["action_scores"], axis=1) == 1 if "action_scores" in out
                    else np.zeros(len(d.y_val), dtype=bool))
        bought = np.array([s.name in node.sensors for s in d.sensors])
        got = cm.gate_metrics(bought, escalate, np.argmax(out["probabilities"], axis=1),
                              np.argmax(hpc.proba_val, axis=1), d.y_val)
        assert got == policy.validation, policy.name
