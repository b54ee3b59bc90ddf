"""The regression confidence cascade (issue 33): its exported node answers the cheap
regressor's value and scores [t - g, g - t] from its gate as the Python models do (float32
precision), escalating exactly the rows whose gate score is above the threshold; the gate is
fitted on training rows only (out-of-fold values) and each threshold escalates at most its swept
share of validation rows (tied gate scores stay local)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.export.run import run_node
from adaptedge.trainer.methods.regression_cascade import ESCALATE, cascade_graphs
from adaptedge.trainer.regression_hpc import fit_regression_hpc
from tests.support.tiny_regression import tiny_regression_csv


def test_cascade_node_onnx_equals_its_models(tmp_path: Path) -> None:
    d = load_dataset(str(tiny_regression_csv(tmp_path / "t.csv")), target="temp",
                     task="regression")
    hpc = fit_regression_hpc(d, trees=10, oof=True)
    graphs = cascade_graphs(d, hpc, seed=0, quick=True)
    assert len(graphs) == 2 * len(ESCALATE)
    shares: list[float] = []
    for graph in graphs:
        node = graph.nodes["n0"]
        X = d.X_val[:, list(node.inputs)].astype(np.float32)
        out = run_node(node.model.to_onnx(), X)
        np.testing.assert_allclose(out["value"][:, 0], node.model.value(X), rtol=1e-5,
                                   atol=1e-5)
        scores = node.model.action_scores(X)
        if scores is None:
            assert "action_scores" not in out and len(node.actions) == 1
            continue
        np.testing.assert_allclose(out["action_scores"], scores, rtol=1e-5, atol=1e-5)
        share = float(graph.params["escalate_share"])
        escalated = np.mean(out["action_scores"][:, 1] > out["action_scores"][:, 0])
        assert escalated <= share + 1e-9  # a quantile of the gate; tied scores stay local
        shares.append(escalated)
    assert max(shares) > 0
