"""CSTC / CSCC on boosted-tree features (``--param features=boosted``): the exported tree
ensembles agree with the float64 walk on the four benchmark data sets, each visited node's
compute cost is charged once by every walker, the manifest carries it (and bundles without
one read and hash exactly as before), and the estimators pass the shared checks."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB

import tests.support.estimator_checks as checks
from adaptedge.protocol.bundle import read_manifest, verify
from adaptedge.protocol.costs import compute_cost, decision_cost
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import Manifest
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.export.bundle import evaluate_exports, export_bundle
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.methods.cstc.boosted import TreeSettings, fit_boosted
from adaptedge.trainer.methods.cstc.estimator import CSCCClassifier, CSTCClassifier, _targets
from adaptedge.trainer.methods.cstc.tree_node import TreeNode
from adaptedge.trainer.methods.dag.problem import problem_from
from adaptedge.trainer.methods.registry import MethodOptions, get_method
from adaptedge.trainer.policy.graph import Graph
from adaptedge.trainer.policy.walk import walk
from tests.support.cstc_gradient import assert_node_gradient
from tests.support.dag_parity import assert_same_walk

QUICK = {"features": "boosted", "lambdas": "0.01", "sweeps": "1", "trees": "5",
         "tree_depth": "3", "tree_gammas": "0.001,0", "depth": "2"}


@cache
def data(name: str) -> tuple[Any, Any]:
    dataset = load_dataset(name, seed=0)
    hpc = fit_hpc(dataset, kind=GaussianNB(), cache=False)  # any HPC: the walks are compared
    return dataset, hpc


def boosted_graphs(name: str, method: str = "cstc", **extra: str) -> list[Graph]:
    dataset, hpc = data(name)
    return get_method(method)(dataset, hpc, MethodOptions(quick=True, extra={**QUICK, **extra}))


@pytest.mark.slow
@pytest.mark.parametrize("name,method", [("letter-binary", "cstc"), ("thyroid", "cstc"),
                                         ("miniboone-tiny", "cscc"), ("gas", "cstc")])
def test_exported_tree_nodes_walk_as_the_float64_walk(name: str, method: str) -> None:
    """Same decisions and the same cost (compute included) on every test row not within
    float32 noise of a tie; the tree nodes are really there and charge their trees."""
    dataset, hpc = data(name)
    graphs = boosted_graphs(name, method)
    tree_nodes = [n for g in graphs for n in g.nodes.values() if isinstance(n.model, TreeNode)]
    assert tree_nodes and all(n.compute is not None and n.compute.units > 0 for n in tree_nodes)
    results = evaluate_exports(dataset, hpc, graphs, "test")
    table = problem_from(dataset, hpc).cost_table()
    names = [s.name for s in dataset.sensors]
    for graph, onnx_result in zip(graphs, results, strict=True):
        mine = walk(graph, dataset.X_test, hpc.proba_test, table)
        assert_same_walk(onnx_result, mine, names, graph.name)


def test_each_visit_pays_its_nodes_compute_once() -> None:
    """The walk's cost is the sensors' and link's cost plus, per row, the compute of exactly
    the nodes it visited (so a two-level path pays two nodes, a root answer one)."""
    dataset, hpc = data("letter-binary")
    graphs = boosted_graphs("letter-binary", escalation="off")
    problem = problem_from(dataset, hpc)
    table = problem.cost_table()
    for graph in graphs:
        result = walk(graph, dataset.X_val, hpc.proba_val, table)
        expected = result.read @ problem.sensor_costs + result.escalated * problem.link_cost
        for nid, rows in result.visits.items():
            node = graph.nodes[nid]
            expected[rows] += compute_cost(node.compute, dataset.cost_weights).scalar
        np.testing.assert_allclose(result.cost, expected, rtol=0, atol=1e-12)
        assert (result.cost > result.read @ problem.sensor_costs).all()


@pytest.fixture(scope="module")
def boosted_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    dataset, hpc = data("letter-binary")
    root = tmp_path_factory.mktemp("boosted") / "b"
    return root, export_bundle(root, dataset, hpc, boosted_graphs("letter-binary"))


def test_runtime_charges_the_visited_nodes_and_counts_them(
        boosted_bundle: tuple[Path, Manifest]) -> None:
    """The edge runtime's per-decision cost = decision_cost(sensors read, escalated) + the
    compute of every node in ``Decision.nodes``; its counters add the same."""
    from adaptedge.edge.runtime import EdgeRuntime

    bundle, manifest = boosted_bundle
    dataset, _ = data("letter-binary")
    weights = manifest.cost_weights
    for point in manifest.operating_points[:3]:
        graph = manifest.policies[point.policy]
        with EdgeRuntime.load(bundle, operating_point=point.name) as rt:
            total = 0.0
            for x in dataset.X_test[:60]:
                d = rt.predict_row(x)
                own = sum(compute_cost(graph.nodes[n].compute, weights).scalar for n in d.nodes)
                sent = d.request_id is not None
                base = decision_cost(manifest, d.sensors_read, sent).scalar
                assert own > 0 and d.cost.scalar == pytest.approx(base + own, abs=1e-12)
                total += d.cost.scalar
            assert rt.counters["cost"] == pytest.approx(total, rel=1e-12)


def test_manifest_carries_compute_and_refuses_bad_values(
        boosted_bundle: tuple[Path, Manifest]) -> None:
    bundle, manifest = boosted_bundle
    verify(bundle)
    raw = json.loads((bundle / "manifest.json").read_text())
    computes = [n["compute"] for g in raw["policies"].values() for n in g["nodes"].values()
                if "compute" in n]  # a constant node (no trees) has none
    assert computes and all(set(c) == {"energy_mj", "latency_ms", "units"} for c in computes)
    assert read_manifest(bundle) == manifest
    for bad, message in (({"units": -1.0}, "units"), ({"watts": 1.0}, "unknown fields"),
                         ({"units": "1"}, "wrong type")):
        edited = json.loads(json.dumps(raw))
        node = next(iter(next(iter(edited["policies"].values()))["nodes"].values()))
        node["compute"] = bad
        with pytest.raises(BundleError, match=message):
            Manifest.from_dict(edited)


def test_a_bundle_without_compute_writes_no_compute_field(tmp_path: Path) -> None:
    """Raw-feature CSTC: no node has a compute cost, so its manifest has no ``compute`` key
    (bundles without one hash as before) and the walkers charge nothing extra."""
    dataset, hpc = data("letter-binary")
    graphs = get_method("cstc")(dataset, hpc, MethodOptions(quick=True, extra={
        "lambdas": "0.1", "sweeps": "1", "depth": "2", "escalation": "off"}))
    assert all(n.compute is None for g in graphs for n in g.nodes.values())
    export_bundle(tmp_path / "raw", dataset, hpc, graphs)
    assert '"compute"' not in (tmp_path / "raw" / "manifest.json").read_text()
    verify(tmp_path / "raw")


def test_boosting_fits_the_targets_and_records_each_trees_sensors() -> None:
    dataset, _ = data("thyroid")
    cols = [s.features for s in dataset.sensors]
    Y = _targets(dataset.y_train, len(dataset.classes))
    plain = fit_boosted(dataset.X_train, Y, cols, TreeSettings(trees=30, depth=3))
    miser = fit_boosted(dataset.X_train, Y, cols, TreeSettings(trees=30, depth=3,
                                                                gammas=(0.01,)))
    assert plain.n_outputs == 3 and plain.transform(dataset.X_val).shape == (
        len(dataset.y_val), 3 * plain.n_trees)
    score = plain.transform(dataset.X_val).reshape(-1, plain.n_trees, 3).sum(axis=1)
    assert (score.argmax(axis=1) == dataset.y_val).mean() > 0.9
    for f in (plain, miser):
        owner = {c: g for g, c_s in enumerate(cols) for c in c_s}
        assert all(s == tuple(sorted({owner[j] for j in t.features_used}))
                   for t, s in zip(f.trees, f.sensors, strict=True))
    assert len(set().union(*miser.sensors)) < len(set().union(*plain.sensors))


@pytest.mark.slow
def test_boosted_estimators_clone_pickle_refit_and_not_fitted() -> None:
    dataset, _ = data("letter-binary")
    n = 1500
    d = checks.Data(dataset.X_train[:n], dataset.y_train[:n], np.zeros((n, 2)),
                    dataset.X_test[:500])
    kw: dict[str, Any] = {"lam": 0.003, "sweeps": 1, "features": "boosted", "trees": 15,
                          "tree_depth": 4, "tree_gammas": (0.0,)}
    for factory in (lambda: CSTCClassifier(depth=2, **kw),
                    lambda: CSCCClassifier(stages=2, **kw),
                    lambda: CSCCClassifier(stages=2, variant="cronus", **kw)):
        checks.check_clone_params(factory())
        with pytest.raises(ValueError, match="not fitted"):
            factory().predict_proba(d.X_test)
        a = factory().fit(d.X_train, d.y_train)
        b = factory().fit(d.X_train, d.y_train)
        np.testing.assert_array_equal(a.predict_proba(d.X_test), b.predict_proba(d.X_test))
        checks.check_pickle(a, d)
        assert (a.predict(d.X_test) == dataset.y_test[:500]).mean() > 0.75
    with pytest.raises(ValueError, match="features must be raw or boosted"):
        CSTCClassifier(features="deep").fit(d.X_train, d.y_train)


def test_bad_boosted_options_are_refused() -> None:
    for extra, message in (({"features": "deep"}, "features must be raw or boosted"),
                           ({"trees": "0"}, "trees >= 1"),
                           ({"tree_gammas": "a,b"}, "tree_gammas"),
                           ({"tree_cost": "-1"}, "tree_cost must be >= 0")):
        with pytest.raises(ValueError, match=message):
            boosted_graphs("thyroid", **extra)


@pytest.mark.parametrize(("variant", "m", "k"), [("cstc", 1, 0), ("cstc", 3, 4),
                                                  ("cscc", 1, 1), ("cronus", 3, 0)])
def test_node_gradient_with_overlapping_groups(variant: str, m: int, k: int) -> None:
    """Tree columns in several groups (their sensors' and their own): the block objective's
    gradient still matches finite differences."""
    from adaptedge.trainer.methods.cstc.objective import Params, Problem
    from adaptedge.trainer.methods.cstc.structure import cascade, full_tree

    rng = np.random.default_rng(5)
    X = rng.normal(size=(50, 4))
    y = rng.integers(0, 2 if m == 1 else m, size=50)
    member = np.array([[1, 1, 0, 1, 0, 0, 0], [0, 1, 1, 0, 1, 0, 0], [1, 0, 1, 0, 0, 1, 0],
                       [0, 0, 1, 0, 0, 0, 1]], dtype=float)  # 3 sensors, then 4 trees
    prob = Problem(X, _targets(y, 2 if m == 1 else m), np.ones(50), np.zeros(4, dtype=np.int64),
                   np.array([0.5, 1.0, 1.5, 0.1, 0.1, 0.1, 0.1]), 0.3, 0.01,
                   variant, member, 4)  # type: ignore[arg-type]
    n = 7
    P = Params([rng.normal(size=(4, m)) for _ in range(n)], [rng.normal(size=m) for _ in range(n)],
               [rng.normal(size=m) if m > 1 else np.ones(1) for _ in range(n)],
               rng.normal(size=n), [np.ones(7, dtype=bool) for _ in range(n)])
    shape = full_tree(3) if variant == "cstc" else cascade(4)
    assert_node_gradient(prob, shape, P, k)
    assert prob.prune_order(np.ones(7, dtype=bool)) == [4, 5, 3, 6]  # priced with sensors
