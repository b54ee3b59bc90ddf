"""``adaptedge evaluate``: run a bundle's exported ONNX models (never Python objects) on a
dataset split and report accuracy and cost of every operating point against always-cloud.

``best_within_1pct`` is the cheapest point certified within 0.01 of the HPC's VALIDATION
accuracy with 97.5% confidence, measured here: the paired lower bound on (its accuracy - the
HPC's) on the same held-out certify rows (the validation rows the trainer kept from every fit
and choice, re-drawn from ``metadata["certify"]``; all validation rows for bundles without it)
is >= -0.01 (``protocol.operating_points.certified_near``, the trainer's rule), reported on the requested split with cost_reduction = 1 - cost / HPC cost
(both on that split); when none is, ``not_certified`` says so in one line with the validation
rows the most accurate point would need. Each point shows its paired bound measured here
(``validation_paired_bound``) and the validation accuracy interval the bundle stores with it
(``validation_interval``, null for older bundles).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptedge.cli.errors import CommandError

TOLERANCE = 0.01


@dataclass(frozen=True)
class Scored:
    """A point's accuracy and mean cost as measured here (``protocol.operating_points``)."""

    accuracy: float
    cost: float


def register(sub: Any) -> None:
    p = sub.add_parser("evaluate", help="evaluate a bundle's operating points on a dataset split",
                       description=__doc__)
    p.add_argument("--bundle", required=True, type=Path, help="bundle directory or .tar")
    p.add_argument("--data", required=True, help="built-in dataset name or CSV/TSV(.gz) path")
    p.add_argument("--target", help="label column of a CSV/TSV file")
    p.add_argument("--costs", type=Path, help="TOML costs file used at training")
    p.add_argument("--grouping", help="sensor grouping used at training")
    p.add_argument("--seed", type=int, default=None,
                   help="split seed (default: the bundle's recorded split, else 0)")
    p.add_argument("--split", choices=("validation", "test"), default="test")
    p.add_argument("--budget", type=float, help="per-decision budget (training-scalar units): "
                   "each item runs the model the bundle's budget index picks for its size")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=run)


def evaluate_bundle(root: Path, dataset: Any, split: str) -> dict[str, Any]:
    """The evaluation report (the ``--json`` object) of a verified bundle directory."""
    import numpy as np

    from adaptedge.protocol.bundle import verify
    from adaptedge.protocol.costs import hpc_cost
    from adaptedge.protocol.operating_points import PairedCounts
    from adaptedge.trainer.policy.oracle import BundleRunner, PolicyResult

    manifest = verify(root)
    if tuple(manifest.feature_names) != tuple(dataset.feature_names):
        raise CommandError(
            f"the bundle's {len(manifest.feature_names)} features do not match dataset "
            f"{dataset.name!r} ({len(dataset.feature_names)} features; first bundle feature "
            f"{manifest.feature_names[0]!r}, first dataset feature {dataset.feature_names[0]!r})"
            ": evaluate with the dataset the bundle was trained on")
    if tuple(manifest.classes) != tuple(dataset.classes):
        raise CommandError(f"the bundle's classes {list(manifest.classes)} do not match dataset "
                           f"{dataset.name!r} classes {list(dataset.classes)}")
    runner = BundleRunner.from_dir(root)
    results: dict[str, dict[str, PolicyResult]] = {}

    def result(policy: str, which: str) -> PolicyResult:
        if which not in results:
            results[which] = {}
        if policy not in results[which]:
            X, y = dataset.split(which)
            sizes = dataset.split_sizes(which)  # each item's own cost when costs grow with it
            results[which][policy] = (runner.evaluate_hpc(X, y, sizes) if policy == "\0hpc"
                                      else runner.evaluate(policy, X, y, sizes))
        return results[which][policy]

    hpc_scalar = hpc_cost(manifest).scalar
    if manifest.size_dependent and dataset.sizes is not None:
        hpc_scalar = result("\0hpc", split).mean_cost
    select, certify = held_out_rows(manifest, dataset.y_val)
    y_val = dataset.y_val
    hpc_right = (result("\0hpc", "validation").labels == y_val)[certify].tolist()
    paired = [PairedCounts.of((result(p.policy, "validation").labels == y_val)[certify].tolist(),
                              hpc_right) for p in manifest.operating_points]
    points: list[dict[str, Any]] = []
    for point, counts in zip(manifest.operating_points, paired, strict=True):
        r = result(point.policy, split)
        points.append({"name": point.name, "default": point.name == manifest.default_operating_point,
                       "accuracy": r.accuracy, "cost": r.mean_cost,
                       "escalation_rate": r.escalation_rate,
                       "avg_sensors_read": r.avg_sensors_read, "energy_mj": r.mean_energy_mj,
                       "latency_ms": r.mean_latency_ms, "bytes": r.mean_bytes,
                       "validation_paired_bound": counts.lower_bound,
                       "validation_interval": (None if point.accuracy_interval is None
                                               else list(point.accuracy_interval))})
    scored = [Scored(float(np.mean(result(p.policy, "validation").labels[select]
                                   == y_val[select])), p.cost)
              for p in manifest.operating_points]  # the selection rows' accuracy; cost: order
    chosen, by = default_by_rule(manifest, scored, paired)
    best, missing = None, None
    if chosen is None:  # the trainer's default then: the most accurate on every validation row
        overall = [Scored(result(p.policy, "validation").accuracy, p.cost)
                   for p in manifest.operating_points]
        missing = _not_certified(overall, paired, dataset, len(certify))
    else:
        point = manifest.operating_points[chosen]
        r = result(point.policy, split)
        best = {"name": point.name, "accuracy": r.accuracy, "cost": r.mean_cost,
                "cost_reduction": (1.0 - r.mean_cost / hpc_scalar) if hpc_scalar > 0 else None,
                "certified_by": by}
    from adaptedge.cli.inspect_cmd import cost_unit

    return {
        "hpc": {"accuracy": result("\0hpc", split).accuracy, "cost": hpc_scalar},
        "cost_unit": cost_unit(manifest),
        "default_operating_point": manifest.default_operating_point,
        "points": points,
        "best_within_1pct": best,
        "not_certified": missing,
    }


def default_by_rule(manifest: Any, scored: list[Scored], paired: list[Any]
                    ) -> tuple[int | None, str | None]:
    """The trainer's certified point measured here (``None``: none) and the method whose
    sequence certified it (``None``: the one sequence of a single-method front). A bundle
    recording per-method sequences (``metadata["certify_sequences"]``, ``--method auto``)
    is re-checked with the alpha shares it records (fixed on the selection rows at training),
    each method's points tested here on the certify rows; else the one fixed sequence."""
    from adaptedge.protocol.method_sequences import (
        SEQUENCES_KEY,
        cheapest_certified,
        method_sequences,
    )
    from adaptedge.protocol.operating_points import certified_near

    record = manifest.metadata.get(SEQUENCES_KEY)
    if not record:
        return certified_near(scored, [c.lower_bound for c in paired], TOLERANCE,
                              fallback=False), None
    shares = {m: float(v["alpha"]) for m, v in record["methods"].items()}
    methods = [p.method or "" for p in manifest.operating_points]
    found = cheapest_certified(scored, method_sequences(scored, paired, methods, shares,
                                                        float(record["tolerance"])))
    return (None, None) if found is None else (found[0], found[1].method)


def _not_certified(overall: list[Scored], paired: list[Any], dataset: Any,
                   n_certify: int) -> str | None:
    """``not_certified``'s line for the most accurate point of ``overall`` (every validation
    row), its counts on the ``n_certify`` certify rows (``None``: no points)."""
    from adaptedge.protocol.operating_points import most_accurate
    from adaptedge.trainer.api import not_certified

    top = most_accurate(overall)
    if top is None:
        return None
    n_val = len(dataset.y_val)
    total = sum(len(dataset.split(s)[1]) for s in ("train", "validation", "test"))
    rows = "validation" if n_certify == n_val else "held-out certify"
    return not_certified(paired[top], TOLERANCE, total, rows, n_certify / max(n_val, 1))


def held_out_rows(manifest: Any, y_val: Any) -> tuple[Any, Any]:
    """Validation row indices (selection, certify) as the trainer drew them
    (``metadata["certify"]``, ``trainer.data.splits.certify_rows``); a bundle without the
    record (``--certify-fraction 0``, older bundles): every row both selects and certifies."""
    import numpy as np

    from adaptedge.trainer.data.splits import CERTIFY_KEY, certify_rows

    record = manifest.metadata.get(CERTIFY_KEY)
    if not record:
        every = np.arange(len(y_val))
        return every, every
    return certify_rows(y_val, float(record["fraction"]), int(record["seed"]))


def run(args: argparse.Namespace) -> int:
    from adaptedge.protocol.bundle import open_bundle, verify
    from adaptedge.trainer.data.bundle_data import load_for_bundle

    with open_bundle(args.bundle) as root:
        manifest = verify(root)
        recipe = manifest.split
        seed = args.seed if args.seed is not None else (recipe.seed if recipe else 0)
        dataset = load_for_bundle(args.data, manifest, target=args.target, costs=args.costs,
                                  grouping=args.grouping, seed=seed)
        dataset = recipe_validation(recipe, dataset, seed)
        check_split(recipe, dataset, seed)
        if args.budget is not None and manifest.is_regression:
            raise CommandError("--budget evaluates a budget index, which regression bundles do "
                               "not have; evaluate every point without --budget")
        if args.budget is not None:
            return _run_budget(root, dataset, args)
        if manifest.is_regression:
            from adaptedge.cli.evaluate_regression import evaluate_regression, render_regression

            report = evaluate_regression(root, dataset, args.split)
            show = render_regression
        else:
            report, show = evaluate_bundle(root, dataset, args.split), render
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(show(report, f"bundle {args.bundle} on {dataset.name} ({args.split} split)"))
    return 0


def replay_seed(recipe: Any, data: str) -> int:
    """The split seed to run ``--data``/``--replay`` ``data`` with: the bundle's own when it was
    trained on that dataset (``recipe``: the manifest's ``SplitRecipe`` or ``None``), else 0."""
    return int(recipe.seed) if recipe is not None and recipe.dataset == data else 0


def recipe_validation(recipe: Any, dataset: Any, seed: int) -> Any:
    """``dataset`` with validation re-drawn as the bundle's was (``train --val-fraction``)
    when the recipe's validation share differs from the dataset's own split."""
    from adaptedge.trainer.data.splits import validation_fraction, with_val_fraction

    if recipe is None or recipe.dataset != dataset.name or len(recipe.fractions) != 3:
        return dataset
    if abs(recipe.fractions[1] - validation_fraction(dataset)) <= 1e-6:
        return dataset
    return with_val_fraction(dataset, recipe.fractions[1], seed)


def check_split(recipe: Any, dataset: Any, seed: int) -> None:
    """Refuse to evaluate on the bundle's own dataset with another split than it was trained
    on (its training rows would leak into the evaluation). ``recipe``: the manifest's
    ``SplitRecipe`` or ``None`` (older bundles: nothing to check)."""
    from adaptedge.trainer.data.splits import split_recipe

    if recipe is None or recipe.dataset != dataset.name:
        return
    if split_recipe(dataset, seed).digest != recipe.digest:
        raise CommandError(
            f"the bundle was trained on a split of {recipe.dataset} with seed {recipe.seed} (digest "
            f"{recipe.digest[:12]}), but --data {dataset.name} with seed {seed} gives another "
            f"split: drop --seed (or pass --seed {recipe.seed}) and use the data it was "
            "trained on")


def render(report: dict[str, Any], title: str) -> str:
    hpc = report["hpc"]
    w = max([len("operating point")] + [len(p["name"]) + 2 for p in report["points"]]) + 2
    cost = f"cost ({report['cost_unit']})" if report.get("cost_unit") else "cost"
    cw = max(10, len(cost) + 2)
    lines = [title,
             f"HPC (always cloud): accuracy {hpc['accuracy']:.4f}, cost {hpc['cost']:.4g}", "",
             f"{'operating point':<{w}}{'accuracy':>9}{cost:>{cw}}{'escalate':>10}{'sensors':>9}"
             f"{'energy mJ':>11}{'latency ms':>12}{'bytes':>8}  validation 95% interval"
             f"  paired bound vs HPC"]
    for p in report["points"]:
        interval = ("-" if p["validation_interval"] is None
                    else "[{:.4f}, {:.4f}]".format(*p["validation_interval"]))
        paired = p.get("validation_paired_bound")
        bound = "-" if paired is None else f"{paired:+.4f}"
        name = p["name"] + (" *" if p.get("default") else "")
        lines.append(f"{name:<{w}}{p['accuracy']:>9.4f}{p['cost']:>{cw}.4g}"
                     f"{p['escalation_rate']:>10.3f}{p['avg_sensors_read']:>9.2f}"
                     f"{p['energy_mj']:>11.4g}{p['latency_ms']:>12.4g}{p['bytes']:>8.1f}"
                     f"  {interval:<23}  {bound}")
    best = report["best_within_1pct"]
    lines.append("")
    if report.get("default_operating_point"):
        lines.append("* the bundle's default operating point (what a device runs unless told "
                     "otherwise)")
    if best is None:
        lines.append(report.get("not_certified") or "no operating point is within 1% of the "
                     "HPC's validation accuracy with 97.5% confidence")
    else:
        reduction = ("n/a" if best["cost_reduction"] is None
                     else f"{100 * best['cost_reduction']:.1f}%")
        lines.append(f"best within 1% of the HPC (chosen on validation, paired 97.5% bound): "
                     f"{best['name']}: "
                     f"accuracy {best['accuracy']:.4f}, cost {best['cost']:.4g}, "
                     f"cost reduction {reduction}"
                     + (f" (certified by the {best['certified_by']} method's sequence)"
                        if best.get("certified_by") else ""))
    return "\n".join(lines)


def _run_budget(root: Path, dataset: Any, args: argparse.Namespace) -> int:
    from adaptedge.protocol.bundle import verify
    from adaptedge.trainer.policy.budgeted import budget_report
    from adaptedge.trainer.policy.oracle import BundleRunner

    verify(root)
    X, y = dataset.split(args.split)
    try:
        report = budget_report(BundleRunner.from_dir(root), X, y,
                               dataset.split_sizes(args.split), args.budget)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"budget {args.budget:g} on {dataset.name} ({args.split}): accuracy "
              f"{report['accuracy']:.4f}, mean cost {report['mean_cost']:.4g}, over budget "
              f"{report['over_budget']}, no model {report['no_model']} of {report['items']}")
    return 0
