"""The regression confidence cascade (issue 33): its exported node answers the cheap forest's
value and scores [t - g, g - t] from its gate (on the cheap features, value and tree spread) as
the Python models do (float32 precision), escalating exactly the rows whose gate score is above
the threshold; the gate is fitted on training rows only (out-of-fold values) and each threshold
escalates at most its swept share of validation rows (tied gate scores stay local) and lies
between two distinct scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.export.run import run_node
from adaptedge.trainer.methods.regression_cascade import (
    ESCALATE,
    cascade_graphs,
    thresholds,
    value_and_spread,
)
from adaptedge.trainer.regression_hpc import fit_regression_hpc
from tests.support.tiny_regression import tiny_regression_csv


@pytest.mark.slow
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
        escalated = out["action_scores"][:, 1] > out["action_scores"][:, 0]
        np.testing.assert_array_equal(escalated, scores[:, 1] > scores[:, 0])
        assert escalated.mean() <= share + 1e-9  # a quantile of the gate; ties stay local
        shares.append(float(escalated.mean()))
    assert max(shares) > 0


def test_spread_is_the_trees_standard_deviation(tmp_path: Path) -> None:
    d = load_dataset(str(tiny_regression_csv(tmp_path / "t.csv")), target="temp",
                     task="regression")
    hpc = fit_regression_hpc(d, trees=10, oof=True)
    node = cascade_graphs(d, hpc, seed=0, quick=True)[1].nodes["n0"]
    X = d.X_val[:, list(node.inputs)].astype(np.float32)
    each = np.stack([m.predict(X) for m in node.model.cheap.estimators_])
    value, spread = value_and_spread(node.model.cheap, X)
    np.testing.assert_allclose(value, node.model.cheap.predict(X))
    np.testing.assert_allclose(spread, each.std(axis=0))
    assert spread.max() > 0


def test_thresholds_split_between_distinct_scores() -> None:
    scores = np.array([0.0, 1.0, 1.0, 1.0, 2.0, 3.0, 3.0, 4.0, 5.0, 6.0])
    ts = thresholds(scores, (0.0, 0.1, 0.25, 0.5, 0.9))
    assert ts[0] is None
    for share, t in zip((0.1, 0.25, 0.5, 0.9), ts[1:], strict=True):
        assert t is not None and t not in set(scores.tolist())
        assert np.mean(scores > t) <= share
    assert [np.mean(scores > t) for t in ts[1:]] == [0.1, 0.2, 0.5, 0.9]
