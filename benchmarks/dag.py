"""Policy graph (DAG, Graph-Reduce) vs static skyline vs cascade vs one-node (ADAPT's shape).

For each dataset: fit (or load) the HPC, run the DAG's default sweep (timed: ``train_seconds``),
the baselines, and score every point on validation and test. Operating points are chosen on
VALIDATION and reported on TEST: ``*_cost_at_1pct`` is the test cost of the cheapest point
whose validation accuracy is >= the all-sensors classifier's validation accuracy - 0.01;
``best_within_1pct`` follows ``adaptedge evaluate`` (validation accuracy >= the HPC's - 0.01,
``cost_reduction`` against always-cloud: every HPC sensor plus the link).
Writes ``<out>/dag.json`` and one error-vs-cost PNG per dataset; prints the JSON.

``classifier`` names the node-classifier bank (``--classifier``, default "auto": per node the
per-subset or the masked model, by validation log-loss); ``classifier_choice`` says how many
lattice nodes use which; ``node_accuracy`` is the bank's validation accuracy with every sensor
and on the greedy-order prefixes of 1, 2 and 3 sensors.

Run: ``python -m benchmarks.dag [--quick] [--datasets gas,wall-robot] [--out DIR] [--merge]
[--classifier auto|per-subset|masked|hgb|hgb-wide|lr] [--subset-trees N] [--masked-trees N]
[--policy linear|paper] [--policy-degree D] [--replot]``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

DATASETS = ("gas", "wall-robot", "satimage", "letter", "thyroid", "heart", "letter-binary",
            "miniboone-tiny", "gas-time", "wall-robot-time")


def _point(point: Any, bank: Any, family: str) -> dict[str, Any]:
    from adaptedge.trainer.methods.dag.nodes import evaluate

    test = evaluate(point, bank, "test")
    return {"family": family, "params": dict(point.params),
            "nodes": len(point.nodes),
            "val": {"accuracy": point.validation.accuracy, "cost": point.validation.cost,
                    "escalation_rate": point.validation.escalation_rate},
            "test": {"accuracy": test.accuracy, "cost": test.cost,
                     "escalation_rate": test.escalation_rate,
                     "avg_sensors_read": test.avg_sensors_read}}


def chosen(points: list[dict[str, Any]], target: float, n_rows: int | None = None
           ) -> dict[str, Any] | None:
    """The cheapest point (by validation cost) reaching ``target`` on validation: with
    ``n_rows`` (the validation rows) by the operating-point rule, its accuracy's Wilson lower
    bound (``protocol.operating_points.confidently_near``); without, by the point estimate
    (comparisons at equal validation accuracy, not operating points)."""
    from adaptedge.protocol.operating_points import cheapest_reaching, confidently_near
    from adaptedge.trainer.policy.graph import Metrics

    scores = [Metrics(accuracy=p["val"]["accuracy"], cost=p["val"]["cost"]) for p in points]
    i = (cheapest_reaching(scores, target - 1e-12) if n_rows is None
         else confidently_near(scores, target, 0.0, n_rows, fallback=False))
    if i is None:
        return None
    best = points[i]
    return {"test_cost": best["test"]["cost"], "test_accuracy": best["test"]["accuracy"],
            "val_cost": best["val"]["cost"], "val_accuracy": best["val"]["accuracy"],
            "escalation_rate": best["test"]["escalation_rate"], "params": best["params"]}


def _cost(entry: dict[str, Any] | None) -> float | None:
    return None if entry is None else float(entry["test_cost"])


def adapt_points(dataset: Any, hpc: Any, quick: bool, seed: int
                 ) -> tuple[list[dict[str, Any]], float]:
    """ADAPT-GBRT's own sweep (``trainer.methods.adapt_gbrt``), tested through its exported ONNX."""
    from adaptedge.trainer.export.bundle import evaluate_exports, metrics_of
    from adaptedge.trainer.methods.registry import MethodOptions, get_method

    start = time.perf_counter()
    exports = get_method("adapt-gbrt")(dataset, hpc, MethodOptions(seed=seed, quick=quick,
                                                                    progress=False))
    seconds = time.perf_counter() - start
    tests = [metrics_of(r) for r in evaluate_exports(dataset, hpc, exports, "test")]
    return [{"family": "adapt-gbrt", "params": dict(e.params), "nodes": len(e.nodes),
             "val": {"accuracy": e.validation.accuracy, "cost": e.validation.cost,
                     "escalation_rate": e.validation.escalation_rate},
             "test": {"accuracy": t.accuracy, "cost": t.cost,
                      "escalation_rate": t.escalation_rate,
                      "avg_sensors_read": t.avg_sensors_read}}
            for e, t in zip(exports, tests, strict=True)], seconds


def _settings(quick: bool, seed: int, overrides: dict[str, Any] | None) -> Any:
    """The sweep settings of a run: quick or default, with the command line's overrides."""
    from adaptedge.trainer.methods.dag.sweep import DagSettings

    extra = overrides or {}
    return DagSettings.quick(seed=seed, **extra) if quick else DagSettings(seed=seed, **extra)


def node_accuracy(bank: Any, order: list[int]) -> dict[str, float]:
    """Validation accuracy of the bank's classifier with every sensor and on small prefixes."""
    problem = bank.problem
    y = problem.splits["val"].y
    sets = {"all": problem.all_sensors}
    sets.update({",".join(map(str, sorted(order[:k]))): tuple(sorted(order[:k]))
                 for k in (1, 2, 3) if k < problem.n_sensors})
    return {name: float((bank.proba(s, "val").argmax(axis=1) == y).mean())
            for name, s in sets.items()}


def compare_classifiers(name: str, quick: bool, seed: int, overrides: dict[str, Any]
                        ) -> dict[str, Any]:
    """Node classifiers only (no sweep): per-subset vs masked vs the per-node choice, by
    validation accuracy with every sensor and on greedy-order prefixes (``node_accuracy``),
    with the per-node choice's counts over the lattice nodes and the CPU seconds of each."""
    from dataclasses import replace

    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.dag.masked import ChoiceBank
    from adaptedge.trainer.methods.dag.problem import problem_from
    from adaptedge.trainer.methods.dag.subsets import greedy_order, lattice_scorer
    from adaptedge.trainer.methods.dag.sweep import build_lattice, choose_bank

    dataset = load_dataset(name, seed=seed)
    problem = problem_from(dataset, fit_hpc(dataset, seed=seed))
    settings = _settings(quick, seed, overrides)
    scorer = lattice_scorer(problem, seed)
    lattice, _ = build_lattice(problem, settings, scorer)
    order = greedy_order(problem, scorer)
    result: dict[str, Any] = {"lattice_nodes": len(lattice.edges)}
    for choice in ("per-subset", "masked", "auto"):
        start = time.process_time()
        bank = choose_bank(problem, replace(settings, classifier=choice),
                           mask_sets=list(lattice.edges))
        row: dict[str, Any] = {"kind": bank.kind, "node_accuracy": node_accuracy(bank, order)}
        if isinstance(bank, ChoiceBank):
            row["lattice_nodes"] = bank.counts(list(lattice.edges))
        row["cpu_seconds"] = time.process_time() - start
        result[choice] = row
    return result


def run_dataset(name: str, quick: bool, seed: int, with_adapt: bool = False,
                overrides: dict[str, Any] | None = None
                ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.dag.problem import problem_from
    from adaptedge.trainer.methods.dag.sweep import sweep_dag

    dataset = load_dataset(name, seed=seed)
    start = time.perf_counter()
    hpc = fit_hpc(dataset, seed=seed)
    hpc_seconds = time.perf_counter() - start
    problem = problem_from(dataset, hpc)
    settings = _settings(quick, seed, overrides)
    sweep = sweep_dag(problem, settings)
    bank = sweep.bank

    start = time.perf_counter()
    baselines, everything, order = _baseline_points(problem, sweep, settings)
    baseline_seconds = time.perf_counter() - start
    points = ([_point(p, bank, "dag" if p.params["escalation_price"] != "off"
                      else "dag-no-escalation") for p in sweep.points] + baselines)
    adapt_seconds = None
    if with_adapt:
        adapt, adapt_seconds = adapt_points(dataset, hpc, quick, seed)
        points += adapt
    all_point = _point(everything, bank, "all-sensors")
    result: dict[str, Any] = {
        "sensors": problem.n_sensors,
        "all_sensors_cost": problem.total_cost,
        "link_cost": problem.link_cost,
        "all_sensors_accuracy": all_point["test"]["accuracy"],
        "all_sensors_val_accuracy": all_point["val"]["accuracy"],
        "hpc_accuracy": float((hpc.proba_test.argmax(axis=1) == dataset.y_test).mean()),
        "hpc_val_accuracy": hpc.val_accuracy,
        "validation_rows": len(dataset.y_val),
        "train_seconds": sweep.seconds,
        "train_cpu_seconds": sweep.cpu_seconds,
        "hpc_seconds": hpc_seconds,
        "baseline_seconds": baseline_seconds,
        "adapt_gbrt_seconds": adapt_seconds,
        "lattice_nodes": len(sweep.lattice.edges),
        "tracks": [list(t) for t in sweep.tracks],
        "classifier_fits": bank.fits,
        "reduction": sweep.reduction,
        "classifier": bank.kind,
        "classifier_choice": sweep.classifier,
        "node_accuracy": node_accuracy(bank, order),
        "reduction_scores": sweep.reduction_scores,
    }
    _add_choices(result, points, problem.total_cost + problem.link_cost)
    result["points"] = [*points, all_point]
    return result, result["points"]


def _baseline_points(problem: Any, sweep: Any, settings: Any
                     ) -> tuple[list[dict[str, Any]], Any, list[int]]:
    """The static skyline, cascade and one-node points beside the DAG's (as result points),
    the all-sensors static point and the greedy sensor order."""
    from adaptedge.trainer.methods.dag.baselines import (
        cascade_points,
        one_node_points,
        static_points,
        static_sets,
    )
    from adaptedge.trainer.methods.dag.subsets import greedy_order
    from adaptedge.trainer.policy.frontier import pareto_frontier as frontier

    bank, scorer = sweep.bank, sweep.scorer
    sets = static_sets(bank, scorer, max_exhaustive=settings.max_exhaustive,
                       extra=list(sweep.lattice.edges))
    statics = static_points(bank, sets)
    sky = frontier(statics)
    all_root = "n" + "_".join(str(s) for s in problem.all_sensors)
    everything = next(p for p in statics if p.root == all_root)
    order = greedy_order(problem, scorer)
    cascades = cascade_points(bank, order, settings.lambdas, sweep.reduction)
    gate_sets = [tuple(p.nodes[p.root].model.classifier) for p in sky][-3:]
    gates = one_node_points(bank, gate_sets, settings.lambdas, sweep.reduction)
    points = ([_point(p, bank, "static") for p in sky]
              + [_point(p, bank, "cascade") for p in cascades]
              + [_point(p, bank, "one-node") for p in gates])
    return points, everything, order


def _add_choices(result: dict[str, Any], points: list[dict[str, Any]],
                 always_cloud: float) -> None:
    """Each family's point chosen on validation (within 1% of the all-sensors and of the HPC's
    validation accuracy; operating points by the Wilson lower bound on the validation rows)."""
    target = result["all_sensors_val_accuracy"] - 0.01
    hpc_target = result["hpc_val_accuracy"] - 0.01
    n_val = result["validation_rows"]

    def family(*names: str) -> list[dict[str, Any]]:
        return [p for p in points if p["family"] in names]

    result["at_1pct"] = {fam: chosen(family(*fams), target, n_val) for fam, fams in (
        ("dag", ("dag", "dag-no-escalation")), ("dag_escalation", ("dag",)),
        ("dag_no_escalation", ("dag-no-escalation",)), ("static", ("static",)),
        ("cascade", ("cascade",)), ("one_node", ("one-node",)))}
    result["at_hpc_1pct"] = {fam: chosen(family(*fams), hpc_target, n_val) for fam, fams in (
        ("dag", ("dag", "dag-no-escalation")), ("dag_escalation", ("dag",)),
        ("dag_no_escalation", ("dag-no-escalation",)), ("static", ("static",)),
        ("one_node", ("one-node",)), ("adapt_gbrt", ("adapt-gbrt",)))}
    result["dag_cost_at_1pct"] = _cost(chosen(family("dag", "dag-no-escalation"), target, n_val))
    result["static_cost_at_1pct"] = _cost(chosen(family("static"), target, n_val))
    if result["dag_cost_at_1pct"] is not None and result["static_cost_at_1pct"]:
        result["dag_to_static_cost_ratio"] = (result["dag_cost_at_1pct"]
                                              / result["static_cost_at_1pct"])
    # as ``adaptedge evaluate``: validation accuracy >= HPC's - 0.01, vs always-cloud cost
    result["always_cloud_cost"] = always_cloud
    for fam, fams in (("dag", ("dag", "dag-no-escalation")), ("static", ("static",)),
                      ("adapt_gbrt", ("adapt-gbrt",)), ("one_node", ("one-node",))):
        best = chosen(family(*fams), hpc_target, n_val)
        if best is not None:
            result.setdefault("best_within_1pct", {})[fam] = {
                **best, "cost_reduction": 1.0 - best["test_cost"] / always_cloud}
    result["escalation_vs_not"] = _dominance(family("dag"), family("dag-no-escalation"))


def _dominance(esc: list[dict[str, Any]], no_esc: list[dict[str, Any]]) -> dict[str, Any]:
    """Cheapest test cost of each at validation-chosen accuracy targets, highest first."""
    accs = sorted({p["val"]["accuracy"] for p in esc + no_esc}, reverse=True)[:6]
    rows = []
    for acc in accs:
        a, b = chosen(esc, acc), chosen(no_esc, acc)
        rows.append({"val_accuracy_target": acc, "with_escalation": a, "without": b})
    return {"most_accurate_on_validation_with": _most_accurate(esc),
            "most_accurate_on_validation_without": _most_accurate(no_esc), "targets": rows}


def _most_accurate(points: list[dict[str, Any]]) -> dict[str, float] | None:
    """The most accurate point on validation (the cheaper on ties), reported on test."""
    from adaptedge.protocol.operating_points import most_accurate
    from adaptedge.trainer.policy.graph import Metrics

    best = most_accurate([Metrics(accuracy=p["val"]["accuracy"], cost=p["val"]["cost"])
                          for p in points])
    if best is None:
        return None
    p = points[best]
    return {"test_accuracy": p["test"]["accuracy"], "test_cost": p["test"]["cost"],
            "val_accuracy": p["val"]["accuracy"], "val_cost": p["val"]["cost"]}


def plot(name: str, points: list[dict[str, Any]], hpc_acc: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    styles = {"dag": ("o-", "DAG + escalation"), "dag-no-escalation": ("s-", "DAG"),
              "static": ("^--", "static skyline"), "cascade": ("v:", "cascade"),
              "one-node": ("d-.", "one node (ADAPT shape)"), "adapt-gbrt": ("x-", "ADAPT-GBRT"),
              "all-sensors": ("k*", "all sensors")}
    for fam, (style, label) in styles.items():
        pts = sorted((p["test"]["cost"], 1 - p["test"]["accuracy"]) for p in points  # reports-test: plot
                     if p["family"] == fam)
        if fam not in ("all-sensors",):
            # the validation frontier of the family, drawn at its test values
            front, best = [], -1.0
            for p in sorted((p for p in points if p["family"] == fam),
                            key=lambda p: (p["val"]["cost"], -p["val"]["accuracy"])):
                if p["val"]["accuracy"] > best:
                    front.append((p["test"]["cost"], 1 - p["test"]["accuracy"]))
                    best = p["val"]["accuracy"]
            pts = front
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, style, label=label, markersize=4)
    ax.axhline(1 - hpc_acc, color="grey", lw=0.8, ls="--", label="HPC error")
    ax.set_yscale("symlog", linthresh=1e-2)
    ax.set_ylim(bottom=0.0)
    ax.set_xlabel("test cost per decision (training scalar)")
    ax.set_ylabel("test error")
    ax.set_title(name)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replot(out: Path, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Redraw every dataset's PNG from ``<out>/dag.json`` (no training)."""
    path = out / "dag.json"
    if not path.is_file():
        parser.error(f"--replot: {path} does not exist; run the benchmark first")
    report: dict[str, Any] = json.loads(path.read_text())
    for name, result in report["datasets"].items():
        result["plot"] = str(out / f"dag-{name}.png")
        plot(name, result["points"], result["hpc_accuracy"], Path(result["plot"]))
    path.write_text(json.dumps(report, indent=1, default=float))
    print(json.dumps({"plots": [r["plot"] for r in report["datasets"].values()]}))
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sweep (seconds per dataset)")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--adapt", default="letter-binary",
                        help="datasets on which ADAPT-GBRT's own sweep also runs ('' for none)")
    parser.add_argument("--classifier", default=None,
                        help="node classifiers: auto (default), per-subset, masked, hgb, "
                             "hgb-wide or lr")
    parser.add_argument("--subset-trees", type=int, default=None,
                        help="tree budget of a per-subset model (rounds x classes beyond 2; "
                             "each stops early on held-out rows)")
    parser.add_argument("--masked-trees", type=int, default=None,
                        help="tree budget of the masked model (rounds x classes beyond 2)")
    parser.add_argument("--policy", default=None, choices=("linear", "paper"),
                        help="node policy: linear (default) or paper (the paper's filter tree, "
                             "``--param policy=paper``)")
    parser.add_argument("--policy-degree", type=int, default=None,
                        help="polynomial degree of --policy paper (default 2)")
    parser.add_argument("--classifiers-only", action="store_true",
                        help="only compare the node classifiers (per-subset, masked, per-node "
                             "choice); writes <out>/dag-classifiers.json")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other datasets of an existing <out>/dag.json")
    parser.add_argument("--replot", action="store_true",
                        help="only redraw <out>/dag-<dataset>.png from <out>/dag.json")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {}
    if args.classifier is not None:
        from adaptedge.trainer.methods.dag.sweep import CLASSIFIER_CHOICES

        if args.classifier not in CLASSIFIER_CHOICES:
            parser.error(f"--classifier must be one of {list(CLASSIFIER_CHOICES)}")
        overrides["classifier"] = args.classifier
    if args.subset_trees is not None:
        overrides["subset_trees"] = args.subset_trees
    if args.masked_trees is not None:
        overrides["masked_trees"] = args.masked_trees
    if args.policy == "paper":
        overrides["reductions"] = ("paper",)
    if args.policy_degree is not None:
        overrides["policy_degree"] = args.policy_degree
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    unknown = sorted(set(names) - set(DATASETS))
    if unknown:
        parser.error(f"unknown datasets {unknown}; choose from {list(DATASETS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.replot:
        return replot(out, parser)
    if args.classifiers_only:
        overrides.pop("classifier", None)
        compared = {"quick": args.quick, "seed": args.seed, "datasets": {
            name: compare_classifiers(name, args.quick, args.seed, overrides) for name in names}}
        (out / "dag-classifiers.json").write_text(json.dumps(compared, indent=1, default=float))
        print(json.dumps(compared, default=float))
        return compared

    report: dict[str, Any] = {"quick": args.quick, "seed": args.seed, "policy": args.policy or "linear",
                              "policy_degree": args.policy_degree, "datasets": {}}
    if args.merge and (out / "dag.json").is_file():
        old = json.loads((out / "dag.json").read_text())
        if old.get("quick") != args.quick or old.get("seed") != args.seed:
            parser.error(f"--merge: {out / 'dag.json'} has quick={old.get('quick')}, "
                         f"seed={old.get('seed')}; run with the same flags or without --merge")
        report["datasets"] = old.get("datasets", {})
    for name in names:
        with_adapt = name in {n.strip() for n in args.adapt.split(",")}
        result, points = run_dataset(name, args.quick, args.seed, with_adapt, overrides)
        plot(name, points, result["hpc_accuracy"], out / f"dag-{name}.png")
        result["plot"] = str(out / f"dag-{name}.png")
        report["datasets"][name] = result
        (out / "dag.json").write_text(json.dumps(report, indent=1, default=float))
    brief = {n: {k: r.get(k) for k in ("all_sensors_accuracy", "dag_cost_at_1pct",
                                        "static_cost_at_1pct", "train_seconds", "classifier")}
             for n, r in report["datasets"].items() if n in names}
    print(json.dumps({"summary": brief, "json": str(out / "dag.json")}, default=float))
    return report


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
