"""Regression bundles (issue 33, contract items 2, 3 and 9): a regression method's sweep, the
regression HPC, every candidate walked on its exported ONNX over the VALIDATION rows (what the
device runs; escalated rows get the HPC's ONNX value), the validation frontier on (cost, MAE:
the rule's error), and the default point by the paired error rule (``protocol.error_rule``).

Each point stores its validation ``mse`` and ``mae`` (the target's units; ``accuracy`` is
-mse) and ``paired_lower_bound``, a one-sided 97.5% lower bound on (HPC MAE - point MAE) on the
same validation rows. The default is the cheapest point certified within ``tolerance`` (default
``error_rule.default_tolerance``: 5% of the HPC's validation MAE, the target's unit) by
fixed-sequence testing along the frontier, else the lowest validation MSE; under a ``budget``,
the lowest validation MSE within it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from adaptedge.protocol.bundle import verify, write_bundle
from adaptedge.protocol.error_rule import RULE_METRIC, PairedErrors, default_tolerance
from adaptedge.protocol.manifest import HpcRef, Manifest, OperatingPoint, schema_version
from adaptedge.protocol.operating_points import certified_near
from adaptedge.protocol.split_recipe import SplitRecipe
from adaptedge.trainer.data.costs import sensor_cost_vector
from adaptedge.trainer.data.dataset_core import Dataset
from adaptedge.trainer.errors import TrainError
from adaptedge.trainer.export.bundle import HPC_FILE, manifest_graph
from adaptedge.trainer.methods.with_quick import renamed
from adaptedge.trainer.policy.graph import Graph, Metrics
from adaptedge.trainer.policy.oracle import BundleRunner, PolicyResult
from adaptedge.trainer.regression_hpc import RegressionHpc, fit_regression_hpc

SWEEPS: dict[str, dict[str, tuple[float, ...]]] = {
    "cstc": {"full": (0.1, 0.01, 1e-3), "quick": (0.1,)},
    "greedy-miser": {"full": (0.0, 1e-3, 1e-2), "quick": (0.0, 1e-2)},
}
"""Each method's swept parameter (cstc: lambda; greedy-miser: gamma), full and ``--quick``."""


def regression_graphs(dataset: Dataset, method: str, *, seed: int, quick: bool) -> list[Graph]:
    """The method's candidate policy graphs, fitted on the training rows (CSTC and Greedy
    Miser pick their iteration on the validation rows, as in their papers)."""
    from adaptedge.trainer.export.regression_nodes import (
        cstc_regression_graph,
        greedy_miser_regression_graph,
    )
    from adaptedge.trainer.methods.cstc.regressor import CSTCRegressor
    from adaptedge.trainer.methods.greedy_miser_regression import GreedyMiserRegressor

    costs, owner = sensor_cost_vector(dataset.sensors, dataset.cost_weights, dataset.n_features)
    names = [s.name for s in dataset.sensors]
    y_train, y_val = dataset.targets("train"), dataset.targets("validation")
    graphs = []
    for value in SWEEPS[method]["quick" if quick else "full"]:
        if method == "cstc":
            cstc = CSTCRegressor(groups=[s.features for s in dataset.sensors],
                                 costs=costs.tolist(), lam=value, random_state=seed).fit(
                dataset.X_train, y_train, dataset.X_val, y_val)
            graph = cstc_regression_graph(cstc, names, {"lambda": value})
            name = f"cstc-lambda-{value:g}"
        else:
            gm = GreedyMiserRegressor(
                gamma=value, n_trees=40 if quick else 400, max_depth=6, learning_rate=0.2,
                min_samples_leaf=5, feature_sensor=owner.tolist(), sensor_costs=costs.tolist(),
                random_state=seed).fit(dataset.X_train, y_train).at_best_iteration(
                dataset.X_val, y_val)
            graph = greedy_miser_regression_graph(
                gm, names, {"gamma": value, "iterations": float(gm.best_iteration_)})
            name = f"greedy-miser-gamma-{value:g}"
        graphs.append(replace(graph, name=name))
    return graphs


def _point(graph: Graph, result: PolicyResult, errors: PairedErrors) -> OperatingPoint:
    params = {k: v if isinstance(v, str) else float(v) for k, v in sorted(graph.params.items())}
    return OperatingPoint(
        name=graph.name, policy=graph.name, accuracy=-errors.point_mse, cost=result.mean_cost,
        escalation_rate=result.escalation_rate, avg_sensors_read=result.avg_sensors_read,
        params={**params, "method": graph.method}, method=graph.method or None,
        mse=errors.point_mse, mae=errors.point_mae, paired_lower_bound=errors.lower_bound)


def build_regression(dataset: Dataset, hpc: RegressionHpc, graphs: Sequence[Graph], *,
                     metadata: Mapping[str, Any], split: SplitRecipe | None = None
                     ) -> tuple[Manifest, dict[str, bytes]]:
    """The manifest (default: the first point; hashes pending) and files of ``graphs``,
    every point measured on the validation rows through its exported ONNX."""
    files: dict[str, bytes] = {HPC_FILE: hpc.onnx_bytes()}
    policies = {g.name: manifest_graph(g, files) for g in graphs}
    manifest = Manifest(
        schema_version=schema_version(True, policies), bundle_id="pending", classes=(),
        feature_names=dataset.feature_names, sensors=dataset.sensors, link=dataset.link,
        cost_weights=dataset.cost_weights,
        hpc=HpcRef(HPC_FILE, hpc.sensors, accuracy=0.0, description=hpc.description),
        policies=policies, operating_points=tuple(
            OperatingPoint(g.name, g.name, accuracy=0.0, cost=0.0) for g in graphs),
        default_operating_point=graphs[0].name, files={}, metadata=dict(metadata),
        split=split, task="regression", target=dataset.target_name,
        target_unit=dataset.target_unit)
    runner = BundleRunner.from_files(manifest, files)
    X, y = dataset.X_val, dataset.targets("validation")
    hpc_values = runner.evaluate_hpc(X, y).values  # what the cloud answers: the HPC's ONNX
    hpc_err = PairedErrors.of(y, hpc_values, hpc_values)
    points = []
    for g in graphs:
        result = runner.evaluate(g.name, X, y)
        points.append(_point(g, result, PairedErrors.of(y, result.values, hpc_values)))
    hpc_ref = replace(manifest.hpc, accuracy=-hpc_err.point_mse, mse=hpc_err.point_mse,
                      mae=hpc_err.point_mae)
    return replace(manifest, hpc=hpc_ref, operating_points=tuple(points)), files


def frontier(points: Sequence[OperatingPoint]) -> list[OperatingPoint]:
    """The validation frontier on the rule's error: cost ascending, MAE strictly falling
    (first of equals kept; a point without ``mae`` is never kept)."""
    kept: list[OperatingPoint] = []
    for p in sorted(points, key=lambda q: (q.cost, q.mae if q.mae is not None else np.inf)):
        if p.mae is not None and (not kept or p.mae < (kept[-1].mae or 0.0)):
            kept.append(p)
    return kept


def choose(points: Sequence[OperatingPoint], hpc_mae: float, tolerance: float | None,
           budget: float | None) -> tuple[OperatingPoint, dict[str, Any]]:
    """The default point and what the manifest's metadata says of it (rule, certified,
    tolerance in the target's unit, on MAE), by ``certified_near`` or, with ``budget``, the
    lowest MSE within it."""
    tol = default_tolerance(hpc_mae) if tolerance is None else tolerance
    meta: dict[str, Any] = {"tolerance": tol, "tolerance_units": "target units (MAE)",
                            "rule_metric": RULE_METRIC}
    scored = [Metrics(p.accuracy, p.cost) for p in points]
    if budget is not None:
        within = [p for p in points if p.cost <= budget]
        point = max(within, key=lambda p: p.accuracy) if within else points[0]
        rule = (f"the lowest validation MSE with validation cost <= --budget {budget:g}"
                if within else f"the cheapest point: --budget {budget:g} is below every point")
        return point, {**meta, "default_rule": rule, "certified": None}
    bounds = [p.paired_lower_bound for p in points]
    i = certified_near(scored, bounds, tol)
    assert i is not None  # points is never empty
    point, bound = points[i], float(bounds[i] or -np.inf)
    if bound >= -tol:
        rule = (f"the cheapest point whose validation MAE is within {tol:.4g} (target units) "
                f"of the HPC's {hpc_mae:.4g} with 97.5% confidence (paired lower bound "
                f"{bound:+.4g} on HPC MAE - its MAE; fixed sequence from the most expensive)")
        return point, {**meta, "default_rule": rule, "certified": True}
    rule = (f"NOT certified: no point is within {tol:.4g} of the HPC's validation MAE "
            f"{hpc_mae:.4g} with 97.5% confidence; the default is the lowest validation MSE "
            f"({point.mse:.4g}, paired lower bound {bound:+.4g} on the MAE difference)")
    return point, {**meta, "default_rule": rule, "certified": False}


def method_graphs(dataset: Dataset, method: str, hpc: RegressionHpc, *, seed: int,
                  quick: bool) -> list[Graph]:
    """The regression method's candidates (the cascade's gate uses the HPC's out-of-fold
    values; the others do not use the HPC)."""
    if method == "confidence":
        from adaptedge.trainer.methods.regression_cascade import cascade_graphs

        return cascade_graphs(dataset, hpc, seed=seed, quick=quick)
    return regression_graphs(dataset, method, seed=seed, quick=quick)


def train_regression(dataset: Dataset, method: str, out: Path, *, seed: int, quick: bool,
                     n_jobs: int, hpc_kind: str, budget: float | None,
                     tolerance: float | None, metadata: Mapping[str, Any], force: bool,
                     split: SplitRecipe | None) -> Manifest:
    """Fit the regression HPC and ``method``'s sweep, keep the validation frontier, choose the
    default and write the verified bundle to ``out``."""
    if tolerance is not None and not (tolerance >= 0 and np.isfinite(tolerance)):
        raise TrainError(f"--tolerance must be a finite MAE >= 0 (target units), "
                         f"got {tolerance:g}")
    kind = "extra-trees" if hpc_kind == "auto" else hpc_kind
    hpc = fit_regression_hpc(dataset, kind, seed, n_jobs=n_jobs, trees=20 if quick else None,
                             oof=method == "confidence")
    graphs = method_graphs(dataset, method, hpc, seed=seed, quick=quick)
    if not quick:  # the default front then beats --quick's (trainer.methods.with_quick):
        # --quick's nodes as --quick fits them (the cascade ranks sensors by its 20-tree HPC),
        # escalating to this bundle's HPC
        quick_hpc = hpc if method != "confidence" else fit_regression_hpc(
            dataset, kind, seed, n_jobs=n_jobs, trees=20, oof=True)
        quick_graphs = method_graphs(dataset, method, quick_hpc, seed=seed, quick=True)
        graphs += renamed(quick_graphs, {g.name for g in graphs})
    meta = {**metadata, "n_candidates": len(graphs)}
    manifest, _ = build_regression(dataset, hpc, graphs, metadata=meta, split=split)
    kept = frontier(manifest.operating_points)
    names = {p.name for p in kept}
    manifest, files = build_regression(dataset, hpc, [g for g in graphs if g.name in names],
                                       metadata=meta, split=split)
    points = frontier(manifest.operating_points)
    assert manifest.hpc.mae is not None
    point, extra = choose(points, manifest.hpc.mae, tolerance, budget)
    manifest = replace(manifest, operating_points=tuple(points),
                       default_operating_point=point.name,
                       metadata={**manifest.metadata, **extra,
                                 "frontier_rule": f"kept {len(points)} of {len(graphs)} "
                                                  f"candidates on the validation frontier"})
    write_bundle(out, manifest, files, force=force)
    return verify(out)
