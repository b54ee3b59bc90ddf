"""The registered one-node sweeps: every exported graph, run by the float32 ONNX oracle
(``trainer.policy.oracle``) and costed by ``protocol.costs``, reproduces its validation metrics
(which the float64 walk computed)."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.protocol.costs import decision_cost
from adaptedge.trainer.data.synthetic import synthetic_2
from adaptedge.trainer.export.bundle import build_bundle
from adaptedge.trainer.hpc import HpcModel, fit_hpc
from adaptedge.trainer.methods.registry import MethodOptions, get_method
from adaptedge.trainer.policy.oracle import BundleRunner

DATA = synthetic_2(n=1000)


@pytest.fixture(scope="module")
def hpc() -> HpcModel:
    return fit_hpc(DATA, kind="hgb", cache=False)


@pytest.mark.slow
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


@pytest.mark.slow
def test_greedy_miser_tree_cost_charges_every_kept_tree_once_per_row(hpc: HpcModel) -> None:
    from adaptedge.protocol.costs import compute_cost
    from adaptedge.trainer.methods.tree_compute import tree_compute

    d = DATA
    free = get_method("greedy-miser")(d, hpc, MethodOptions(quick=True, progress=False))
    charged = get_method("greedy-miser")(d, hpc, MethodOptions(
        quick=True, progress=False, extra={"tree_cost": 0.01}))
    per_tree = compute_cost(tree_compute(d.sensors, 0.01), d.cost_weights).scalar
    assert per_tree > 0
    by_name = {g.name: g for g in free}
    assert {g.name for g in charged} <= set(by_name)
    for graph in charged:
        trees = int(float(graph.params["iterations"]))
        extra = graph.validation.cost - by_name[graph.name].validation.cost
        assert extra == pytest.approx(trees * per_tree, rel=1e-9), graph.name
        assert graph.validation.accuracy == by_name[graph.name].validation.accuracy
    manifest, files = build_bundle(d, hpc, charged)
    runner = BundleRunner.from_files(manifest, files)
    graph = charged[0]
    got = runner.evaluate(graph.name, d.X_val, d.y_val)
    assert got.cost == pytest.approx(graph.validation.cost, rel=1e-12)
    with pytest.raises(ValueError, match="tree_cost"):
        get_method("greedy-miser")(d, hpc, MethodOptions(quick=True, progress=False,
                                                         extra={"tree_cost": -1}))


@pytest.mark.slow
def test_gate_sweep_on_worker_variants_equals_its_own_walk(hpc: HpcModel) -> None:
    """The sweep's fits walk their gate variants on validation in the fit's worker (issue
    #35); ``gate_sweep`` given those variants keeps exactly the front it computes itself."""
    from adaptedge.trainer.methods.adapt_gbrt_method import (
        GateRows,
        _fit_one,
        gate_sweep,
        threshold_candidates,
        variant_name,
    )
    from adaptedge.trainer.methods.gating import CostModel
    from adaptedge.trainer.policy.frontier import pareto_frontier
    from adaptedge.trainer.policy.one_node import one_node_graph, validated

    d = DATA
    cm = CostModel.build(d.sensors, d.cost_weights, d.link, d.n_features, hpc.sensors)
    layout = {"feature_sensor": cm.feature_sensor.tolist(),
              "sensor_costs": cm.sensor_costs.tolist(), "random_state": 0,
              "n_rounds": 2, "n_trees": 4, "refine_rounds": 1}
    rows = GateRows.of(d, hpc, cm, (0.0, 1.0))
    fitted = [_fit_one(({**layout, "p_full": p, "gamma": g}, d.X_train, d.y_train,
                        hpc.oof_proba_train, rows)) for p, g in ((0.2, 1e-3), (0.4, 3e-3))]
    models = [m for m, _ in fitted]
    given = gate_sweep("adapt-gbrt", models, d, hpc, cm, (0.0, 1.0),
                       variants=[v for _, v in fitted])
    own = gate_sweep("adapt-gbrt", models, d, hpc, cm, (0.0, 1.0))
    # the reference: every variant walked here through the model's own gate_score
    reference = []
    for model in models:
        for w in (0.0, 1.0):
            for tau in threshold_candidates(model.with_threshold(0.0, w).gate_score(d.X_val)):
                variant = model.with_threshold(tau, w)
                name, params = variant_name("adapt-gbrt", variant, cm)
                graph = one_node_graph(name, "adapt-gbrt", cm, variant, True, params)
                reference.append(validated(graph, d, hpc, cm, model.predict_proba(d.X_val),
                                           variant.gate_score(d.X_val)))
    front = pareto_frontier(reference)
    for sweep in (given, own):
        assert sweep and [g.name for g in sweep] == [g.name for g in front]
        assert [g.validation for g in sweep] == [g.validation for g in front]
