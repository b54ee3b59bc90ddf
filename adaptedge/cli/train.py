"""``adaptedge train``: fit the HPC, run a method's sweep, export the validation frontier as a
bundle, and print the frontier.

Two bundles are written: ``--out`` (the full bundle: policies and HPC; the cloud serves it) and
its device bundle beside it (``--device-out``, default ``<out>-device``: every point, no HPC;
what devices load and OTA ships; ``protocol.device_bundle``)."""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path
from typing import Any

from adaptedge.cli.errors import CommandError


def register(sub: Any) -> None:
    from adaptedge.trainer.methods.registry import METHOD_MODULES

    p = sub.add_parser("train", help="train a method and export a bundle",
                       description=__doc__)
    p.add_argument("--data", required=True,
                   help="built-in dataset name (see trainer.data.datasets) or a CSV/TSV(.gz) path")
    p.add_argument("--target", help="label column of a CSV/TSV file")
    p.add_argument("--task", choices=("classification", "regression"),
                   help="regression: --target is a number (a CSV), or a regression built-in "
                   "(gas-concentration); default: classification for a CSV, a built-in's own")
    p.add_argument("--tolerance", type=float,
                   help="regression only: certify a point whose validation MAE is within this "
                   "of the HPC's (paired 97.5%% bound on absolute errors; target units; "
                   "default 5%% of the HPC's validation MAE)")
    p.add_argument("--costs", type=Path, help="TOML costs file: sensors, weights, link")
    p.add_argument("--grouping", help="sensor grouping of a built-in dataset (e.g. per-feature)")
    p.add_argument("--method", required=True, metavar="METHOD",
                   help=f"one of {', '.join(sorted(METHOD_MODULES))}")
    p.add_argument("--budget", type=float,
                   help="default operating point: the most accurate with validation cost <= B")
    p.add_argument("--quick", action="store_true", help="a small sweep (demos, tests)")
    p.add_argument("--time-budget", type=float, metavar="SECONDS",
                   help="--method auto: seconds for all its methods (default: 1.5 x the "
                   "estimated time of every method that applies); methods that would not fit "
                   "are skipped with a progress line")
    p.add_argument("--val-fraction", type=float, metavar="F",
                   help="re-draw validation from the training rows to hold this share of all "
                   "rows (test unchanged; default: the dataset's split): more validation rows "
                   "let the default point be certified within 1%% of the HPC")
    p.add_argument("--certify-fraction", type=float, metavar="F",
                   help="share of the validation rows held out from training and from every "
                   "choice of the sweep, on which the default point is certified (default "
                   "0.5; 0: none, the front certified on the rows that chose it, which is "
                   "not valid under selection; classification only)")
    p.add_argument("--impute", choices=("median",),
                   help="fill missing (empty or nan) cells with their feature's training median, "
                   "for methods that cannot learn from unmeasured sensors (adapt-gbrt, "
                   "greedy-miser and dag learn them without it)")
    p.add_argument("--seed", type=int, default=0, help="seed of splits and models (default 0)")
    p.add_argument("--jobs", type=int, default=None,
                   help="processes for the sweep's fits on this machine (default: the usable "
                        "cores; 1: all in this process); the bundle is the same for any N")
    p.add_argument("--cluster", metavar="tcp://HOST:PORT",
                   help="run the sweep's fits on this Dask scheduler (default "
                        "$ADAPTEDGE_CLUSTER; needs the 'cluster' extra)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="method-specific option (repeatable); the keys of each method are "
                   "in trainer/methods/params.py")
    p.add_argument("--hpc", default="auto",
                   help="HPC kind: auto (the best on validation of logistic, extra-trees and hgb), "
                        "hgb, random-forest, extra-trees, logistic (default auto)")
    p.add_argument("--hpc-onnx", type=Path, help="use this ONNX classifier as the HPC")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--out", required=True, type=Path,
                   help="bundle directory to write: new or empty (or a bundle, with --force)")
    p.add_argument("--device-out", type=Path, metavar="DIR",
                   help="device bundle directory to write (default: <out>-device)")
    p.add_argument("--force", action="store_true",
                   help="replace the bundles already in --out and --device-out")
    p.set_defaults(handler=run)


def parse_params(items: list[str]) -> dict[str, str]:
    """``key=value`` pairs, values as given: ``trainer.methods.params`` converts and checks
    them against the method's table."""
    params: dict[str, str] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--param {item!r}: expected KEY=VALUE")
        params[key.strip()] = raw
    return params


def run(args: argparse.Namespace) -> int:
    from adaptedge.trainer.methods.registry import METHOD_MODULES

    if args.method not in METHOD_MODULES:
        raise CommandError(f"unknown method {args.method!r}; choose one of "
                           f"{', '.join(sorted(METHOD_MODULES))}")
    if args.jobs is not None and args.jobs < 1:
        raise CommandError(f"--jobs must be >= 1, got {args.jobs}")
    if args.val_fraction is not None and not 0 < args.val_fraction < 1:
        raise CommandError(f"--val-fraction must be in (0, 1), got {args.val_fraction:g}")
    if args.certify_fraction is not None and not 0 <= args.certify_fraction < 1:
        raise CommandError(f"--certify-fraction must be in [0, 1), got "
                           f"{args.certify_fraction:g}")
    if args.budget is not None and not (args.budget >= 0 and math.isfinite(args.budget)):
        raise CommandError(f"--budget must be a finite cost >= 0, got {args.budget:g}")
    if args.task == "regression" or args.data == "gas-concentration":
        regression_refusal(args.method)
    extra: dict[str, Any] = dict(parse_params(args.param))
    if args.time_budget is not None:
        if args.method != "auto":
            raise CommandError("--time-budget applies to --method auto only")
        if not (args.time_budget > 0 and math.isfinite(args.time_budget)):
            raise CommandError(f"--time-budget must be > 0 seconds, got {args.time_budget:g}")
        extra["time_budget"] = args.time_budget

    from adaptedge.protocol.bundle import check_target
    from adaptedge.trainer.api import train_bundle
    from adaptedge.trainer.errors import ParamError
    from adaptedge.trainer.parallel import cluster_address, usable_cores

    out = Path(os.path.abspath(args.out))
    device_out = Path(os.path.abspath(args.device_out or out.with_name(f"{out.name}-device")))
    if device_out == out:
        raise CommandError("--device-out must differ from --out")
    check_target(device_out, force=args.force)  # before hours of training, not after
    jobs = usable_cores() if args.jobs is None else args.jobs
    started = time.perf_counter()
    try:
        manifest = train_bundle(
            args.data, args.method, args.out, target=args.target, costs=args.costs,
            grouping=args.grouping, budget=args.budget, quick=args.quick, seed=args.seed,
            n_jobs=jobs, progress=not args.no_progress, hpc_kind=args.hpc,
            hpc_onnx=args.hpc_onnx, extra=extra, force=args.force,
            cluster=cluster_address(args.cluster), val_fraction=args.val_fraction,
            impute=args.impute, task=args.task, tolerance=args.tolerance,
            certify_fraction=args.certify_fraction)
    except ParamError as exc:
        raise CommandError(f"bad --param: {exc}") from exc
    print(render(manifest, args.out, seconds=time.perf_counter() - started))
    # the absolute path: `--out .` replaced the working directory, so "." names nothing now
    print(write_device(out, manifest, device_out, args.force))
    return 0


def regression_refusal(method: str) -> None:
    """``--task regression``: a method that cannot learn it is refused in one line naming
    those that can (before any fit)."""
    from adaptedge.trainer.errors import TrainError
    from adaptedge.trainer.methods.regression import check_regression_method

    try:
        check_regression_method(method)
    except TrainError as exc:
        raise CommandError(str(exc)) from exc


def write_device(out: Path, manifest: Any, device_out: Path, force: bool) -> str:
    """Write the all-points device bundle of the bundle just trained; the line to print."""
    from adaptedge.cli.export_cmd import bundle_bytes
    from adaptedge.protocol.device_bundle import write_device_bundle

    device = write_device_bundle(out, manifest, device_out, force=force)
    return (f"Device bundle {device.bundle_id} written to {device_out} "
            f"({bundle_bytes(Path(device_out))} bytes, every point, no HPC; the full bundle: "
            f"{bundle_bytes(Path(out))} bytes): devices load it and OTA ships it; the cloud "
            f"serves {out}")


def render(m: Any, out: Path, *, seconds: float) -> str:
    """The frontier as text (``seconds``: the wall-clock time of training, kept out of the
    bundle so that its id depends on its content only)."""
    from adaptedge.protocol.costs import hpc_cost

    if m.is_regression:
        return render_regression(m, out, seconds=seconds)
    w = _name_width(m)
    lines = [
        f"{m.metadata.get('method')} on {m.metadata.get('dataset')}: "
        f"{len(m.operating_points)} operating points on the validation frontier "
        f"(of {m.metadata.get('n_candidates')} candidates), "
        f"trained in {seconds:.1f} s",
        *_frontier_lines(m),
        f"HPC: validation accuracy {m.hpc.accuracy:.4f}, always-cloud cost "
        f"{hpc_cost(m).scalar:.4g}",
        "",
        f"{'operating point':<{w}}{'accuracy':>9}{'cost':>10}{'escalate':>10}{'sensors':>9}",
    ]
    for p in m.operating_points:
        mark = " *" if p.name == m.default_operating_point else ""
        lines.append(f"{p.name + mark:<{w}}{p.accuracy:>9.4f}{p.cost:>10.4g}"
                     f"{p.escalation_rate:>10.3f}{p.avg_sensors_read:>9.2f}")
    return "\n".join([*lines, *_closing_lines(m, out)])


def render_regression(m: Any, out: Path, *, seconds: float) -> str:
    """A regression bundle's frontier as text: validation MSE and MAE in the target's unit."""
    from adaptedge.protocol.costs import hpc_cost

    unit = f" ({m.target_unit})" if m.target_unit else ""
    w = _name_width(m)
    lines = [
        f"{m.metadata.get('method')} on {m.metadata.get('dataset')} (regression, target "
        f"{m.target or '?'}{unit}): {len(m.operating_points)} operating points on the "
        f"validation frontier, trained in {seconds:.1f} s",
        *_frontier_lines(m),
        f"HPC: validation MSE {m.hpc.mse:.4g}, MAE {m.hpc.mae:.4g}{unit}, always-cloud cost "
        f"{hpc_cost(m).scalar:.4g}",
        "",
        f"{'operating point':<{w}}{'MSE':>11}{'MAE':>10}{'cost':>10}{'escalate':>10}"
        f"{'bound':>11}",
    ]
    for p in m.operating_points:
        mark = " *" if p.name == m.default_operating_point else ""
        lines.append(f"{p.name + mark:<{w}}{p.mse:>11.4g}{p.mae:>10.4g}{p.cost:>10.4g}"
                     f"{p.escalation_rate:>10.3f}{p.paired_lower_bound:>+11.4g}")
    return "\n".join([*lines, *_closing_lines(m, out)])


def _name_width(m: Any) -> int:
    """The width of the frontier table's first column (names, default marked `` *``)."""
    return max([len("operating point")] + [len(p.name) + 2 for p in m.operating_points]) + 2


def _frontier_lines(m: Any) -> list[str]:
    rule = m.metadata.get("frontier_rule")
    return [f"Frontier: {rule}."] if rule else []


def _closing_lines(m: Any, out: Path) -> list[str]:
    """The default point's rule, the data and where the bundle went (both tasks)."""
    rule = m.metadata.get("default_rule")
    return ["", f"* default operating point{': ' + rule if rule else ''}.",
            f"Data: {m.metadata.get('dataset_description', '?')}",
            f"Bundle {m.bundle_id} written to {out}"]
