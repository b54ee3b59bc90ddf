"""The registered one-node sweeps: every exported graph, run by the float32 ONNX oracle
(``trainer.policy_eval``) and costed by ``protocol.costs``, reproduces its validation metrics
(which the float64 walk computed)."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.protocol.costs import decision_cost
from adaptedge.trainer.export.bundle import build_bundle
from adaptedge.trainer.hpc import HpcModel, fit_hpc
from adaptedge.trainer.methods import MethodOptions, get_method
from adaptedge.trainer.policy_eval import BundleRunner
from adaptedge.trainer.synthetic import synthetic_2

DATA = synthetic_2(n=1000)


@pytest.fixture(scope="module")
def hpc() -> HpcModel:
    return fit_hpc(DATA, kind="hgb", cache=False)


@pytest.mark.parametrize("method", ["adapt-gbrt", "adapt-lin", "l1", "greedy-miser",
                                    "confidence"])
def test_exported_graphs_match_their_validation_metrics(method: str, hpc: HpcModel) -> None:
    d = DATA
    graphs = get_method(method)(d, hpc, MethodOptions(quick=True, progress=False))
    assert graphs
    manifest, files = build_bundle(d, hpc, graphs)
    runner = BundleRunner.from_files(manifest, files)
    hpc_onnx = runner.hpc_proba(d.X_val).argmax(axis=1)
    same_hpc = hpc_onnx == np.argmax(hpc.proba_val, axis=1)
    for graph in graphs:
        assert graph.method == method and len(graph.nodes) == 1
        got = runner.evaluate(graph.name, d.X_val, d.y_val)
        v = graph.validation
        costs = [decision_cost(manifest, (n for n, r in zip(got.sensor_names, row, strict=True)
                                          if r), bool(e)).scalar
                 for row, e in zip(got.sensors_read, got.escalated, strict=True)]
        assert float(np.mean(costs)) == pytest.approx(v.cost, rel=1e-12, abs=1e-12), graph.name
        assert got.escalation_rate == v.escalation_rate, graph.name
        assert got.avg_sensors_read == pytest.approx(v.avg_sensors_read, abs=1e-12)
        # the oracle answers escalated rows with the ONNX HPC: equal wherever both HPCs agree
        agree = ~got.escalated | same_hpc
        expected = np.where(got.escalated, np.argmax(hpc.proba_val, axis=1), got.labels)
        assert np.mean(expected == d.y_val) == pytest.approx(v.accuracy, abs=1e-12), graph.name
        assert np.all((got.labels == expected)[agree]), graph.name
    if method != "greedy-miser":
        assert any(g.validation.escalation_rate > 0 for g in graphs)
