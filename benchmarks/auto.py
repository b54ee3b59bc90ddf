"""``--method auto`` against the methods it merges; prints one JSON object.

    python -m benchmarks.auto [--quick]
        [--datasets letter-binary,digits-binary,breast-cancer,phishing]
        [--seeds 0,1,2,3,4] [--methods confidence,adapt-gbrt,...] [--out DIR] [--jobs N]
        [--val-fraction F]

Per dataset and seed: the HPC is fitted once; ``trainer.methods.auto.run_methods`` runs every
method auto plans (the same call ``--method auto`` makes), timing each; then, for each method
alone and for ``auto`` (``trainer.methods.auto.merge`` of them all, exactly what ``--method
auto`` exports), the validation front is exported in memory and its default point is chosen
as ``adaptedge train`` chooses it (``trainer.api.choose_default``: the paired rule on the
VALIDATION rows, walked on the exported ONNX). That point is reported on TEST: accuracy,
cost, ``cost_reduction = 1 - cost / HPC cost``, the HPC's test accuracy, whether it ``held``
(test accuracy >= the HPC's test accuracy - 0.01) and the paired lower bound on test (reported,
never used to choose). Nothing is chosen on test.

``digits-binary``: scikit-learn's bundled digits (no download), label digit >= 5, written to a
CSV in a temporary directory and read through the CSV path (seeded stratified 60/20/20 split,
every pixel its own sensor, uniform costs).
Writes ``<out>/auto-<dataset>-s<seed>.json`` as each finishes and ``<out>/auto.json``
(default out: ``benchmarks/results/auto``); ``--summarize`` only gathers the per-seed files
found under ``--out`` into ``<out>/auto.json`` (runs split over processes).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def digits_csv(directory: Path) -> Path:
    """scikit-learn's digits as a CSV: 64 pixel columns and ``label`` (``ge5`` / ``lt5``)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    path = directory / "digits-binary.csv"
    lines = [",".join([*(f"p{i}" for i in range(64)), "label"])]
    for row, digit in zip(digits.data, digits.target, strict=True):
        lines.append(",".join([*(f"{v:g}" for v in row), "ge5" if digit >= 5 else "lt5"]))
    path.write_text("\n".join(lines) + "\n")
    return path


def table_csv(name: str, directory: Path) -> Path:
    """A public data set shipped inside a pip package as a CSV with a ``label`` column:
    ``breast-cancer`` (scikit-learn's, 569 rows, 30 features; ``malignant`` / ``benign``) or
    ``phishing`` (river's ``datasets.Phishing``, 1,250 rows, 9 features; ``True`` /
    ``False``: the benchmark extra installs river for it). No download."""
    if name == "breast-cancer":
        from sklearn.datasets import load_breast_cancer

        data = load_breast_cancer()
        names = [f"f{i}" for i in range(data.data.shape[1])]
        rows = [[*(f"{v:.10g}" for v in x), str(data.target_names[t])]
                for x, t in zip(data.data, data.target, strict=True)]
    else:
        from river.datasets import Phishing

        pairs = list(Phishing())
        names = list(pairs[0][0])
        rows = [[*(f"{float(x[k]):g}" for k in names), str(bool(y))] for x, y in pairs]
    path = directory / f"{name}.csv"
    lines = [",".join([*names, "label"]), *(",".join(r) for r in rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def load(name: str, seed: int, tmp: Path) -> Any:
    from adaptedge.trainer.data.datasets import load_dataset

    if name == "digits-binary":
        return load_dataset(str(digits_csv(tmp)), target="label", seed=seed)
    if name in ("breast-cancer", "phishing"):
        return load_dataset(str(table_csv(name, tmp)), target="label", seed=seed)
    return load_dataset(name, seed=seed)


def default_point(dataset: Any, hpc: Any, hpc_onnx: bytes, graphs: list[Any],
                  hpc_cost: float, *, rules: bool = False, seed: int = 0,
                  certify: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """The default point of ``graphs``' validation front as ``train`` picks it (the bounds on
    the held-out ``certify`` rows, or with ``None`` on the validation rows that chose the
    front), reported on test; with ``rules``, also what each certifying rule of ``RULES``
    picks."""
    from adaptedge.trainer.api import choose_default
    from adaptedge.trainer.export.bundle import build_bundle, paired_on_rows, paired_on_validation
    from adaptedge.trainer.policy.frontier import pareto_frontier
    from adaptedge.trainer.policy.oracle import BundleRunner
    from adaptedge.trainer.validation_reference import validation_walks

    front = list(pareto_frontier(graphs))
    manifest, files = build_bundle(dataset, hpc, front, hpc_onnx=hpc_onnx)
    runner = BundleRunner.from_files(manifest, files)  # one session per model for every walk
    walks = validation_walks(manifest, files, dataset.split("validation")[0], runner)
    cert_walks = (None if certify is None
                  else validation_walks(manifest, files, certify[0], runner))
    paired = (paired_on_validation(manifest, files, dataset, walks) if certify is None
              else paired_on_rows(manifest, files, *certify, cert_walks))
    point, _, certified = choose_default(front, paired, None, selection_rows=0 if certify is None
                                         else len(dataset.y_val), hpc_accuracy=hpc.val_accuracy)
    i = next(k for k, p in enumerate(front) if p is point)
    out = {"point": point.name, "method": point.method, "certified": certified,
           "front_size": len(front),
           "validation": {"accuracy": point.validation.accuracy, "cost": point.validation.cost,
                          "paired_lower_bound": paired[i].lower_bound},
           "test": on_test(runner, point.name, dataset, hpc, hpc_cost)}
    if rules:
        _, y_val = dataset.split("validation")
        right = [walks.results[p.policy].labels == y_val for p in manifest.operating_points]
        tests = [on_test(runner, p.name, dataset, hpc, hpc_cost) for p in front]
        out["front"] = {"n_rows": len(y_val), "hpc_right": _bits(walks.hpc_labels == y_val),
                        "points": [{"name": p.name, "method": p.method,
                                    "validation_cost": p.validation.cost,
                                    "validation_right": _bits(r), "test": t}
                                   for p, r, t in zip(front, right, tests, strict=True)]}
        if certify is not None and cert_walks is not None:
            y_c = certify[1]
            out["front"]["certify"] = {"n_rows": len(y_c),
                                       "hpc_right": _bits(cert_walks.hpc_labels == y_c),
                                       "points_right": [
                                           _bits(cert_walks.results[p.policy].labels == y_c)
                                           for p in manifest.operating_points]}
        out["front"]["hpc_validation_accuracy"] = hpc.val_accuracy
        out["rules"] = rule_table(out["front"], seed)
    return out


def on_test(runner: Any, name: str, dataset: Any, hpc: Any, hpc_cost: float) -> dict[str, Any]:
    """A point's TEST figures against the HPC's (reported, never used to choose)."""
    from adaptedge.protocol.operating_points import paired_lower_bound

    X, y = dataset.split("test")
    result = runner.evaluate(name, X, y)
    right = result.labels == y
    hpc_right = np.argmax(hpc.proba_test, axis=1) == y  # reports-test: row-wise prediction
    hpc_acc = float(np.mean(hpc_right))
    return {"accuracy": result.accuracy, "cost": result.mean_cost,
            "escalation_rate": result.escalation_rate,
            "cost_reduction": 1 - result.mean_cost / hpc_cost if hpc_cost else 0.0,
            "hpc_accuracy": hpc_acc, "held": result.accuracy >= hpc_acc - 0.01,
            "paired_lower_bound": paired_lower_bound(
                int(np.sum(right & ~hpc_right)), int(np.sum(~right & hpc_right)), len(y))}


RULES = ("fixed_sequence", "per_point", "split", "held_out", "held_out_per_method",
         "train_default")
"""``fixed_sequence``: ``certified_near`` on the rows that chose the front (the rule before
the certify hold-out: the front tested from the most expensive point, stop at the first
failure; not valid under selection); ``per_point``: on those rows, the cheapest point whose
own bound passes (``sequential=False``, the rule before that); ``split``: a seeded random
half of those rows chooses the front, the other half certifies it (the methods' knobs saw
both halves); ``held_out``: the trainer's rule, the front tested in fixed sequence on the
certify rows no fit and no choice saw (only when the run held them out): one merged sequence
(the rule before per-method sequences); ``held_out_per_method``: the trainer's rule for
fronts of several methods (``protocol.method_sequences``: one sequence per method on the
certify rows, alpha shares fixed on the selection rows with the HPC's selection accuracy
``front["hpc_validation_accuracy"]``, else the selection rows' HPC outcomes);
``train_default``: what ``train`` makes the default, the ``held_out_per_method`` point or,
when none is certified, the most accurate on every validation row (selection and certify),
the cheaper on ties."""


def _bits(right: Any) -> str:
    """Per-row outcomes as hex (``_unbits`` reads them back)."""
    return np.packbits(np.asarray(right, dtype=bool)).tobytes().hex()


def _unbits(text: str, n: int) -> Any:
    return np.unpackbits(np.frombuffer(bytes.fromhex(text), dtype=np.uint8))[:n].astype(bool)


def rule_table(front: dict[str, Any], seed: int) -> dict[str, Any]:
    """What each rule of ``RULES`` certifies on a recorded front (``default_point``'s
    ``front``: per point its validation cost and per-row outcomes, and its test figures), and
    that point's test figures (``None``: nothing certified). Re-run offline on stored runs."""
    points = front["points"]
    n = int(front["n_rows"])
    right = [_unbits(p["validation_right"], n) for p in points]
    picks = pick_by_rules([p["validation_cost"] for p in points], right,
                          _unbits(front["hpc_right"], n), seed)
    if "certify" in front:
        held = front["certify"]
        m = int(held["n_rows"])
        held_right = [_unbits(r, m) for r in held["points_right"]]
        picks["held_out"] = held_out_pick([p["validation_cost"] for p in points], held_right,
                                          _unbits(held["hpc_right"], m))
        picks["held_out_per_method"] = per_method_pick(front, right, held_right,
                                                       _unbits(held["hpc_right"], m))
    table = {rule: {"point": None if k is None else points[k]["name"],
                    "certified": k is not None,
                    "test": None if k is None else points[k]["test"]}
             for rule, k in picks.items()}
    if "certify" in front:  # what train picks: certified, else most accurate on every row
        k = picks["held_out_per_method"]
        if k is None:
            k = min(range(len(points)), key=lambda i: (
                -(float(np.sum(right[i])) + float(np.sum(held_right[i]))),
                points[i]["validation_cost"], i))
        table["train_default"] = {"point": points[k]["name"],
                                  "certified": picks["held_out_per_method"] is not None,
                                  "test": points[k]["test"]}
    return table


def pick_by_rules(costs: list[float], right: list[Any], hpc_right: Any,
                  seed: int) -> dict[str, int | None]:
    """Index of the point each rule of ``RULES`` certifies (``None``: none), from each
    point's validation cost and its and the HPC's per-row outcomes on VALIDATION."""
    from adaptedge.protocol.operating_points import PairedCounts, certified_near, pareto_front

    def scored(rows: Any) -> list[Any]:
        return [_Scored(float(np.mean(r[rows])) if len(rows) else 0.0, c)
                for r, c in zip(right, costs, strict=True)]

    def bounds(rows: Any) -> list[float | None]:
        return [PairedCounts.of(r[rows], hpc_right[rows]).lower_bound for r in right]

    every = np.arange(len(hpc_right))
    out = {rule: certified_near(scored(every), bounds(every), 0.01, fallback=False,
                                sequential=sequential)
           for rule, sequential in (("fixed_sequence", True), ("per_point", False))}
    half = np.random.default_rng(seed).permutation(every)
    choose, certify = half[: len(half) // 2], half[len(half) // 2:]
    on_a = pareto_front(scored(choose))
    on_b, b_bounds = scored(certify), bounds(certify)
    k = certified_near([on_b[j] for j in on_a], [b_bounds[j] for j in on_a], 0.01,
                       fallback=False)
    out["split"] = None if k is None else on_a[k]
    return out


def held_out_pick(costs: list[float], right: list[Any], hpc_right: Any) -> int | None:
    """The point the trainer's rule certifies from the per-row outcomes on the held-out
    certify rows, tested in fixed sequence by validation cost (``None``: none)."""
    from adaptedge.protocol.operating_points import PairedCounts, certified_near

    bounds: list[float | None] = [PairedCounts.of(r, hpc_right).lower_bound for r in right]
    return certified_near([_Scored(0.0, c) for c in costs], bounds, 0.01, fallback=False)


def per_method_pick(front: dict[str, Any], right: list[Any], held_right: list[Any],
                    hpc_held: Any) -> int | None:
    """The point the trainer's per-method rule certifies on a recorded front (``right``: each
    point's SELECTION-row outcomes, which fix the alpha shares; ``held_right``: its certify-row
    outcomes) (``None``: none). One method: the one sequence, as ``held_out_pick``."""
    from adaptedge.protocol.method_sequences import (
        alpha_shares,
        cheapest_certified,
        method_sequences,
    )
    from adaptedge.protocol.operating_points import PairedCounts

    points = front["points"]
    hpc_accuracy = front.get("hpc_validation_accuracy")
    if hpc_accuracy is None:
        hpc_accuracy = float(np.mean(_unbits(front["hpc_right"], int(front["n_rows"]))))
    scored = [_Scored(float(np.mean(r)), p["validation_cost"])
              for r, p in zip(right, points, strict=True)]
    methods = [p.get("method") for p in points]
    shares = alpha_shares(scored, methods, float(hpc_accuracy), 0.01)
    counts = [PairedCounts.of(r, hpc_held) for r in held_right]
    found = cheapest_certified(scored, method_sequences(scored, counts, methods, shares, 0.01))
    return None if found is None else found[0]


class _Scored:
    def __init__(self, accuracy: float, cost: float) -> None:
        self.accuracy, self.cost = accuracy, cost


def run_one(name: str, seed: int, quick: bool, n_jobs: int, methods: str | None,
            tmp: Path, val_fraction: float | None = None,
            certify_fraction: float = 0.5) -> dict[str, Any]:
    from adaptedge.trainer.data.splits import hold_out_certify, with_val_fraction
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.auto import merge, run_methods
    from adaptedge.trainer.methods.gating import CostModel
    from adaptedge.trainer.methods.registry import MethodOptions

    d = load(name, seed, tmp)
    if val_fraction is not None:
        d = with_val_fraction(d, val_fraction, seed)
    n_val = len(d.y_val)
    certify = None
    if certify_fraction > 0:  # as train --certify-fraction: no fit and no choice sees them
        d, certify = hold_out_certify(d, certify_fraction, seed)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    hpc = fit_hpc(d, seed=seed, n_jobs=n_jobs, progress=False)
    hpc_seconds = time.perf_counter() - started
    cm = CostModel.build(d.sensors, d.cost_weights, d.link, d.n_features, hpc.sensors)
    hpc_cost = float(cm.sensor_costs[cm.hpc_sensors].sum() + cm.link_cost)
    extra: dict[str, Any] = {"time_budget": 1e9} | ({"methods": methods} if methods else {})
    options = MethodOptions(seed=seed, n_jobs=n_jobs, progress=True, quick=quick, extra=extra)
    done = run_methods(d, hpc, options)
    hpc_onnx = hpc.onnx_bytes()
    out: dict[str, Any] = {
        "dataset": name, "seed": seed, "quick": quick, "val_fraction": val_fraction,
        "certify_fraction": certify_fraction,
        "description": d.description,
        "rows": {"train": len(d.y_train), "validation": n_val, "select": len(d.y_val),
                 "certify": 0 if certify is None else len(certify[1]), "test": len(d.y_test)},
        "hpc": {"description": hpc.description, "validation_accuracy": hpc.val_accuracy,
                "cost": hpc_cost, "seconds": hpc_seconds},
        "skipped": dict(done.plan.skipped), "methods": {}}
    for method, graphs in done.candidates.items():
        out["methods"][method] = {"train_seconds": done.seconds[method],
                                  **default_point(d, hpc, hpc_onnx, list(graphs), hpc_cost,
                                                  certify=certify)}
    merged = merge(done.candidates)
    out["methods"]["auto"] = {"train_seconds": sum(done.seconds.values()) + hpc_seconds,
                              **default_point(d, hpc, hpc_onnx, list(merged), hpc_cost,
                                              rules=True, seed=seed, certify=certify),
                              "front_methods": sorted({g.method for g in merged})}
    out["load_average_1min"] = {"before": load_before, "after": os.getloadavg()[0]}
    return out


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per dataset (and ``--val-fraction``, when given) and method: mean test cost reduction
    of the default point over seeds, and on how many seeds it was certified on validation and
    held on test (``held_at_half_cost``: held at >= 0.5 cost reduction); per rule of
    ``RULES`` (``auto/<rule>``): on how many seeds it certified a point, how many of those
    held on test, and their cost reductions."""
    table: dict[str, dict[str, Any]] = {}
    for r in results:
        key = r["dataset"] + ("" if r.get("val_fraction") is None
                              else f" (val-fraction {r['val_fraction']:g})")
        for method, m in r["methods"].items():
            row = table.setdefault(key, {}).setdefault(
                method, {"seeds": [], "cost_reduction": [], "certified": 0, "held": 0,
                         "held_at_half_cost": 0})
            row["seeds"].append(r["seed"])
            row["cost_reduction"].append(round(m["test"]["cost_reduction"], 4))
            row["certified"] += bool(m["certified"])
            row["held"] += bool(m["test"]["held"])
            row["held_at_half_cost"] += bool(m["test"]["held"]
                                             and m["test"]["cost_reduction"] >= 0.5)
        for rule, m in r["methods"].get("auto", {}).get("rules", {}).items():
            row = table[key].setdefault(f"auto/{rule}", {"seeds": [], "certified": 0,
                                                         "held": 0, "cost_reduction": [],
                                                         "held_at_half_cost": 0})
            row["seeds"].append(r["seed"])
            if rule == "train_default":  # always a point: count it like a method's default
                t = m["test"]
                row["certified"] += bool(m["certified"])
                row["held"] += bool(t["held"])
                row["held_at_half_cost"] += bool(t["held"] and t["cost_reduction"] >= 0.5)
                row["cost_reduction"].append(round(t["cost_reduction"], 4))
            elif m["certified"]:
                row["certified"] += 1
                row["held"] += bool(m["test"]["held"])
                row["cost_reduction"].append(round(m["test"]["cost_reduction"], 4))
    for rows in table.values():
        for row in rows.values():
            row["mean_cost_reduction"] = (round(float(np.mean(row["cost_reduction"])), 4)
                                          if row["cost_reduction"] else None)
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--datasets", default="letter-binary,digits-binary")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--methods", help="auto's methods (default: its own plan)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--summarize", action="store_true",
                    help="run nothing: summarize every auto-*-s*.json under --out into "
                    "<out>/auto.json")
    ap.add_argument("--val-fraction", type=float,
                    help="as train --val-fraction: validation re-drawn from the training rows "
                    "to hold this share of all rows (test unchanged)")
    ap.add_argument("--certify-fraction", type=float, default=0.5,
                    help="as train --certify-fraction: this share of validation held out from "
                    "every fit and choice, the default certified on it (0: none)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/auto"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        runs = [json.loads(p.read_text()) for p in sorted(args.out.rglob("auto-*-s*.json"))]
        for r in runs:  # the rules re-run on each stored front (the current code's rules)
            auto = r["methods"].get("auto", {})
            if "front" in auto:  # runs before the front recorded it: the run's HPC figure
                auto["front"].setdefault("hpc_validation_accuracy",
                                         r["hpc"]["validation_accuracy"])
                auto["rules"] = rule_table(auto["front"], r["seed"])
        body = {"summary": summary(runs), "runs": runs}
        (args.out / "auto.json").write_text(json.dumps(body, indent=1))
        print(json.dumps(body["summary"], indent=1))
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                r = run_one(name, seed, args.quick, args.jobs, args.methods, Path(tmp),
                            args.val_fraction, args.certify_fraction)
                tag = "" if args.val_fraction is None else f"-v{args.val_fraction:g}"
                (args.out / f"auto-{name}{tag}-s{seed}.json").write_text(json.dumps(r, indent=1))
                results.append(r)
    body = {"summary": summary(results), "runs": results}
    suffix = ("-quick" if args.quick else "") + (
        "" if args.val_fraction is None else f"-v{args.val_fraction:g}")
    (args.out / f"auto{suffix}.json").write_text(json.dumps(body, indent=1))
    print(json.dumps(body, indent=1))


if __name__ == "__main__":
    main()
