"""``adaptedge evaluate`` on a regression bundle (issue 33): every point's ``mse``, ``mae`` and
``cost`` on the split, walked on the exported ONNX (escalated rows answered by the HPC's ONNX),
against always-cloud (the HPC's ``mse`` and ``mae``), errors in the target's unit.

``best_within_tolerance`` is the cheapest point certified on VALIDATION by the paired error
rule (``protocol.error_rule``: a one-sided 97.5% lower bound on HPC MAE - point MAE on the same
validation rows >= -tolerance, fixed-sequence testing from the most expensive point; the
tolerance is the bundle's when it was recorded for this rule's metric, else 5% of the HPC's
validation MAE measured here), reported on the requested split; none: ``not_certified`` says
so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def evaluate_regression(root: Path, dataset: Any, split: str) -> dict[str, Any]:
    """The ``--json`` report of a verified regression bundle directory on ``dataset``."""
    from adaptedge.cli.inspect_cmd import cost_unit
    from adaptedge.protocol.bundle import verify
    from adaptedge.protocol.costs import hpc_cost
    from adaptedge.protocol.error_rule import RULE_METRIC, PairedErrors, default_tolerance
    from adaptedge.protocol.operating_points import certified_near
    from adaptedge.trainer.policy.graph import Metrics
    from adaptedge.trainer.policy.oracle import BundleRunner

    manifest = verify(root)
    runner = BundleRunner.from_dir(root)
    X, y = dataset.X_val, dataset.targets("validation")
    hpc_val = runner.evaluate_hpc(X, y)
    X_s, y_s = dataset.split(split)[0], dataset.targets(split)
    hpc = runner.evaluate_hpc(X_s, y_s)
    recorded = manifest.metadata.get("tolerance")
    same_rule = manifest.metadata.get("rule_metric") == RULE_METRIC
    tol = (float(recorded) if same_rule and isinstance(recorded, int | float)
           else default_tolerance(hpc_val.mae))
    points: list[dict[str, Any]] = []
    scored, bounds = [], []
    for point in manifest.operating_points:
        val = runner.evaluate(point.policy, X, y)
        paired = PairedErrors.of(y, val.values, hpc_val.values)
        scored.append(Metrics(-paired.point_mse, val.mean_cost))
        bounds.append(paired.lower_bound)
        r = runner.evaluate(point.policy, X_s, y_s)
        points.append({"name": point.name,
                       "default": point.name == manifest.default_operating_point,
                       "mse": r.mse, "mae": r.mae, "cost": r.mean_cost,
                       "escalation_rate": r.escalation_rate,
                       "avg_sensors_read": r.avg_sensors_read, "energy_mj": r.mean_energy_mj,
                       "latency_ms": r.mean_latency_ms, "bytes": r.mean_bytes,
                       "validation_mse": paired.point_mse,
                       "validation_mae": paired.point_mae,
                       "validation_paired_bound": paired.lower_bound})
    hpc_scalar = hpc_cost(manifest).scalar
    chosen = certified_near(scored, bounds, tol, fallback=False)
    best, missing = None, None
    if chosen is None:
        missing = (f"NOT certified: no point's validation MAE is within {tol:.4g} of the HPC's "
                   f"{hpc_val.mae:.4g} with 97.5% confidence (best paired bound "
                   f"{max(bounds):+.4g})")
    else:
        p = points[chosen]
        best = {"name": p["name"], "mse": p["mse"], "mae": p["mae"], "cost": p["cost"],
                "cost_reduction": (1.0 - p["cost"] / hpc_scalar) if hpc_scalar > 0 else None}
    return {"task": "regression",
            "target": {"name": manifest.target, "unit": manifest.target_unit},
            "hpc": {"mse": hpc.mse, "mae": hpc.mae, "cost": hpc_scalar,
                    "validation_mse": hpc_val.mse, "validation_mae": hpc_val.mae},
            "cost_unit": cost_unit(manifest), "tolerance": tol, "rule_metric": RULE_METRIC,
            "default_operating_point": manifest.default_operating_point, "points": points,
            "best_within_tolerance": best, "not_certified": missing}


def render_regression(report: dict[str, Any], title: str) -> str:
    """The report as a table, errors in the target's unit (MSE in its square)."""
    unit = report["target"]["unit"]
    u, u2 = (f" {unit}", f" {unit}^2") if unit else ("", "")
    hpc = report["hpc"]
    w = max([len("operating point")] + [len(p["name"]) + 2 for p in report["points"]]) + 2
    lines = [title,
             f"HPC (always cloud): MSE {hpc['mse']:.4g}{u2}, MAE {hpc['mae']:.4g}{u}, cost "
             f"{hpc['cost']:.4g}", "",
             f"{'operating point':<{w}}{'MSE':>11}{'MAE':>10}{'cost':>10}{'escalate':>10}"
             f"{'sensors':>9}  paired MAE bound vs HPC (validation)"]
    for p in report["points"]:
        name = p["name"] + (" *" if p["default"] else "")
        lines.append(f"{name:<{w}}{p['mse']:>11.4g}{p['mae']:>10.4g}{p['cost']:>10.4g}"
                     f"{p['escalation_rate']:>10.3f}{p['avg_sensors_read']:>9.2f}"
                     f"  {p['validation_paired_bound']:+.4g}")
    lines += ["", "* the bundle's default operating point"]
    best = report["best_within_tolerance"]
    if best is None:
        lines.append(report["not_certified"])
    else:
        lines.append(f"best within {report['tolerance']:.4g}{u} of the HPC's MAE (chosen on "
                     f"validation, paired 97.5% bound): {best['name']}: MSE {best['mse']:.4g}, "
                     f"MAE {best['mae']:.4g}{u}, cost {best['cost']:.4g}")
    return "\n".join(lines)
