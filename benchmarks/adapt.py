"""Accuracy vs cost of ADAPT-GBRT, ADAPT-LIN and the baselines; prints one JSON object.

    python -m benchmarks.adapt [--quick] [--seed S] [--datasets letter-binary,synthetic-2] [--out DIR]
        [--param METHOD:KEY=VALUE ...]

Per dataset: the HPC (validation/test accuracy, cost), then per method the exported ONNX
node models evaluated on validation and test (never the Python objects), the point chosen on
validation as the cheapest within 1% of the HPC's validation accuracy (``best_within_1pct``,
reported on test with ``cost_reduction = 1 − cost / HPC cost``), ``cost_at_full_accuracy``
(the test cost of the cheapest point reaching the HPC's validation accuracy on validation, with
that point in ``full_accuracy_point``; ``null`` when none does; nothing is chosen on test) and
the training seconds. ``certified_within_1pct``: THE default-point rule (the cheapest point
whose paired 97.5% lower bound on its validation accuracy minus the HPC's, on the same rows, is
>= −0.01; ``protocol.operating_points.certified_near``; each point's
``validation.paired_lower_bound``), on test (``null`` when none is certified);
``best_within_1pct`` is the older marginal rule. Greedy Miser runs at the paper's protocol
(3,000 trees at η = 0.1, the iteration chosen on validation, ``trainer.methods.greedy_miser``);
``--quick`` is the small variant. The ``lightgbm-cegb`` row is the trainer method ``cegb``
(LightGBM's cost-efficient gradient boosting at full strength: the best validation round,
coupled and lazy prices swept, escalation cuts on validation quantiles).
Writes ``adapt.json`` and one ``<dataset>.png`` (test accuracy vs cost) into ``--out``
(default ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

DATASETS = ("synthetic-1", "synthetic-2", "letter-binary", "satimage", "miniboone-tiny",
            "thyroid")
METHODS = ("adapt-gbrt", "adapt-lin", "l1", "greedy-miser", "confidence")
ALIASES = {"lightgbm-cegb": "cegb"}
"""Benchmark rows run by a trainer method of another name."""


def _dataset(name: str, seed: int) -> Any:
    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.data.synthetic import synthetic_1, synthetic_2

    if name == "synthetic-1":
        return synthetic_1()
    if name == "synthetic-2":
        return synthetic_2()
    return load_dataset(name, seed=seed)


def _hpc(name: str, d: Any, n_jobs: int, seed: int) -> Any:
    from adaptedge.trainer.hpc import fit_hpc

    if name == "synthetic-1":
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.svm import SVC

        svm = CalibratedClassifierCV(SVC(C=10.0, gamma=1.0), ensemble=False)
        return fit_hpc(d, kind=svm, n_jobs=n_jobs, seed=seed)
    return fit_hpc(d, n_jobs=n_jobs, seed=seed)


def _walked(policy: Any, d: Any, hpc: Any, cm: Any, split: str) -> Any:
    """The one walk on ``split`` with the graph's own node models (answers and metrics)."""
    from adaptedge.trainer.policy.walk import walk

    X, _ = d.split(split)
    hpc_proba = hpc.proba_val if split == "validation" else hpc.proba_test
    return walk(policy, X, hpc_proba, cm.table())


def _point(name: str, val: Any, test: Any, d: Any, hpc: Any) -> dict[str, Any]:
    """A point's validation and test metrics (walk results) and its paired lower bound."""
    from adaptedge.protocol.operating_points import paired_lower_bound

    right = val.answer == d.y_val
    hpc_right = np.argmax(hpc.proba_val, axis=1) == d.y_val
    point_only, hpc_only = int(np.sum(right & ~hpc_right)), int(np.sum(~right & hpc_right))
    v, t = val.metrics(d.y_val), test.metrics(d.y_test)
    return {"name": name,
            "validation": {"accuracy": v.accuracy, "cost": v.cost,
                           "escalation_rate": v.escalation_rate, "point_only": point_only,
                           "hpc_only": hpc_only, "paired_lower_bound": paired_lower_bound(
                               point_only, hpc_only, len(d.y_val))},
            "test": {"accuracy": t.accuracy, "cost": t.cost,
                     "escalation_rate": t.escalation_rate}}


def _certified(points: list[dict[str, Any]], hpc_cost: float) -> dict[str, Any] | None:
    """The trainer's default point (``certified_near``, paired, on validation), on test."""
    from adaptedge.protocol.operating_points import certified_near

    bounds = [p["validation"]["paired_lower_bound"] for p in points]
    i = certified_near(_scores(points), bounds, 0.01, fallback=False)
    if i is None:
        return None
    p = points[i]
    return {**_chosen(p, hpc_cost), "escalation_rate": p["test"]["escalation_rate"],
            "paired_lower_bound": p["validation"]["paired_lower_bound"]}


def _scores(points: list[dict[str, Any]]) -> list[Any]:
    """The points' validation (accuracy, cost), as the operating-point rules take them."""
    from adaptedge.trainer.policy.graph import Metrics

    return [Metrics(accuracy=p["validation"]["accuracy"], cost=p["validation"]["cost"])
            for p in points]


def _chosen(p: dict[str, Any], hpc_cost: float) -> dict[str, Any]:
    """A point a rule chose on validation, reported on test."""
    return {"name": p["name"], "accuracy": p["test"]["accuracy"], "cost": p["test"]["cost"],
            "validation_accuracy": p["validation"]["accuracy"],
            "validation_cost": p["validation"]["cost"],
            "cost_reduction": 1 - p["test"]["cost"] / hpc_cost if hpc_cost > 0 else 0.0}


def _most_accurate(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The point most accurate on validation (the cheaper on ties), with its test numbers."""
    if not points:
        return None
    p = max(points, key=lambda p: (p["validation"]["accuracy"], -p["validation"]["cost"]))
    return {"name": p["name"], **{f"validation_{k}": v for k, v in p["validation"].items()},
            "test_accuracy": p["test"]["accuracy"], "test_cost": p["test"]["cost"]}


def _best(points: list[dict[str, Any]], hpc_val: float, hpc_cost: float, n_val: int
          ) -> dict[str, Any] | None:
    """The operating-point rule (``protocol.operating_points.confidently_near``): the cheapest
    point whose validation accuracy's Wilson lower bound is >= the HPC's - 0.01; on test."""
    from adaptedge.protocol.operating_points import confidently_near

    i = confidently_near(_scores(points), hpc_val, 0.01, n_val, fallback=False)
    return None if i is None else _chosen(points[i], hpc_cost)


def _full_accuracy(points: list[dict[str, Any]], hpc_val: float) -> dict[str, Any]:
    """Where a method matches the HPC: the cheapest point reaching the HPC's validation
    accuracy on validation, reported on test (never chosen on test)."""
    out: dict[str, Any] = {"cost_at_full_accuracy": None, "full_accuracy_point": None}
    on_val = [p for p in points if p["validation"]["accuracy"] >= hpc_val - 1e-12]
    if on_val:
        p = min(on_val, key=lambda p: (p["validation"]["cost"], -p["validation"]["accuracy"]))
        out["cost_at_full_accuracy"] = p["test"]["cost"]
        out["full_accuracy_point"] = {
            "name": p["name"], "accuracy": p["test"]["accuracy"],
            "escalation_rate": p["test"]["escalation_rate"],
            "validation_accuracy": p["validation"]["accuracy"],
            "validation_cost": p["validation"]["cost"]}
    return out


def run_dataset(name: str, quick: bool, n_jobs: int,
                methods: tuple[str, ...] = METHODS, seed: int = 0,
                params: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """One dataset: the HPC, then every method's points; ``params`` holds per-method
    ``--param`` options (``MethodOptions.extra``)."""
    from dataclasses import replace

    from adaptedge.trainer.methods.gating import CostModel
    from adaptedge.trainer.methods.registry import MethodOptions, get_method

    d = _dataset(name, seed)
    started = time.perf_counter()
    hpc = _hpc(name, d, n_jobs, seed)
    hpc_seconds = time.perf_counter() - started
    cm = CostModel.build(d.sensors, d.cost_weights, d.link, d.n_features, hpc.sensors)
    hpc_cost = float(cm.sensor_costs[cm.hpc_sensors].sum() + cm.link_cost)
    hpc_test = float(np.mean(np.argmax(hpc.proba_test, axis=1) == d.y_test))  # reports-test: row-wise
    result: dict[str, Any] = {
        "hpc": {"description": hpc.description, "validation_accuracy": hpc.val_accuracy,
                "test_accuracy": hpc_test, "cost": hpc_cost, "seconds": hpc_seconds,
                "validation_rows": len(d.y_val)},
        "methods": {},
    }
    options = MethodOptions(quick=quick, n_jobs=n_jobs, progress=False, seed=seed)
    for method in methods:
        load_before = os.getloadavg()[0]
        started, cpu = time.perf_counter(), time.process_time()
        extra = (params or {}).get(method, {})
        fn = get_method(ALIASES.get(method, method))
        policies = fn(d, hpc, replace(options, extra=dict(extra)))
        seconds = time.perf_counter() - started
        load = {"load_average_1min_before": load_before,
                "load_average_1min_after": os.getloadavg()[0]}
        points = [_point(p.name, _walked(p, d, hpc, cm, "validation"),
                         _walked(p, d, hpc, cm, "test"), d, hpc) for p in policies]
        result["methods"][method] = {
            "train_seconds": seconds, "cpu_seconds": time.process_time() - cpu, **load,
            "params": extra, "points": points,
            "best_within_1pct": _best(points, hpc.val_accuracy, hpc_cost, len(d.y_val)),
            "certified_within_1pct": _certified(points, hpc_cost),
            "most_accurate_on_validation": _most_accurate(points),
            **_full_accuracy(points, hpc.val_accuracy)}
    return result


def plot(name: str, result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for method, res in result["methods"].items():
        pts = sorted((p["test"]["cost"], p["test"]["accuracy"]) for p in res["points"])  # reports-test: plot
        if pts:
            ax.plot([c for c, _ in pts], [a for _, a in pts], marker="o", ms=3, label=method)
    hpc = result["hpc"]
    ax.axhline(hpc["test_accuracy"], color="k", ls="--", lw=0.8, label="HPC")
    ax.axhline(hpc["test_accuracy"] - 0.01, color="k", ls=":", lw=0.8, label="HPC − 1%")
    ax.set_xlabel("average cost per decision (training scalar)")
    ax.set_ylabel("test accuracy")
    ax.set_title(name)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _params(items: list[str], parser: argparse.ArgumentParser) -> dict[str, dict[str, str]]:
    """``METHOD:KEY=VALUE`` strings as {method: {key: value}}, each checked by the method's
    own parameter table (``trainer.methods.params.check_params``)."""
    from adaptedge.trainer.methods.params import ParamError, check_params

    out: dict[str, dict[str, str]] = {}
    for item in items:
        method, sep, rest = item.partition(":")
        key, eq, value = rest.partition("=")
        if not (sep and eq and method and key) or method not in (*METHODS, *ALIASES):
            parser.error(f"--param {item!r}: write METHOD:KEY=VALUE with METHOD one of "
                         f"{[*METHODS, *ALIASES]}, e.g. adapt-gbrt:warm_start=false")
        out.setdefault(method, {})[key] = value
    for method, extra in out.items():
        try:
            check_params(ALIASES.get(method, method), extra)
        except ParamError as exc:
            parser.error(f"--param: {exc}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sweeps (demo/CI)")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="split and model seed")
    parser.add_argument("--methods", default=",".join((*METHODS, *ALIASES)),
                        help="comma-separated subset of the methods (default: all)")
    parser.add_argument("--param", action="append", default=[], metavar="METHOD:KEY=VALUE",
                        help="a method option, as `adaptedge train --param` (e.g. "
                             "adapt-gbrt:warm_start=false); repeatable")
    args = parser.parse_args(argv)
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    params = _params(args.param, parser)
    unknown = sorted(set(methods) - {*METHODS, *ALIASES})
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {[*METHODS, *ALIASES]}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"quick": args.quick, "n_jobs": args.n_jobs, "seed": args.seed,
                              "params": params,
                              "cpu_count": os.cpu_count(), "datasets": {}}
    for name in [n.strip() for n in args.datasets.split(",") if n.strip()]:
        started = time.perf_counter()
        result = run_dataset(name, args.quick, args.n_jobs, methods, args.seed, params)
        result["total_seconds"] = time.perf_counter() - started
        report["datasets"][name] = result
        plot(name, result, out / f"{name}.png")
        print(f"{name}: done in {result['total_seconds']:.0f}s", file=sys.stderr)
    (out / "adapt.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
