"""``adaptedge simulate``: replay (or run hardware-in-the-loop) a bundle on a dataset split and
write a report (report.md, report.json, PNG plots)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate", help="measure a bundle's accuracy and cost: replay or hardware-in-the-loop",
        description="Replay a dataset split through the real edge runtime and cloud inference "
        "(simulated clock and network), or run real processes over a real broker (--hil), "
        "and write report.md, report.json and PNG plots.")
    p.add_argument("--bundle", required=True, help="bundle directory or .tar")
    p.add_argument("--data", required=True, help="built-in dataset name or CSV/TSV file")
    p.add_argument("--target", help="label column of a CSV/TSV --data file")
    p.add_argument("--split", default="test", choices=("train", "validation", "test"))
    p.add_argument("--scenario", help="TOML scenario file or a shipped scenario by name "
                   "(ideal, flaky-link): network, outages, devices, energy, seed")
    p.add_argument("--operating-point", help="operating point (default: scenario's, else bundle's)")
    p.add_argument("--limit", type=int, help="rows per device (default: scenario's, else all)")
    p.add_argument("--devices", type=int, help="number of devices (default: scenario's, else 1)")
    p.add_argument("--seed", type=int, help="override the scenario's seed")
    p.add_argument("--hil", action="store_true",
                   help="hardware in the loop: real broker, cloud and edge processes")
    p.add_argument("--broker", default="auto",
                   help="with --hil: auto (mosquitto if installed, else amqtt), mosquitto, amqtt "
                   "or mqtt://HOST:PORT")
    p.add_argument("--outage-mode", choices=("proxy", "pause"), default="proxy",
                   help="with --hil: cut the device link at the proxy, or pause the broker")
    p.add_argument("--remote-sensors", action="store_true",
                   help="with --hil: devices read every sensor over MQTT from the simulator "
                   "(<prefix>/v1/<device>/sensor/<name>/get|value), as real hardware would")
    p.add_argument("--timeout", type=float, default=600.0, help="with --hil: give up after S s")
    p.add_argument("--compare", nargs="*", default=[], metavar="BUNDLE",
                   help="other bundles to place on the accuracy-cost frontier")
    p.add_argument("--report", required=True, help="output directory of the report")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(handler=run)


def load_scenario_args(args: argparse.Namespace) -> Any:
    from dataclasses import replace

    from adaptedge.cli.errors import CommandError
    from adaptedge.simulator.scenario import Scenario, load_scenario

    scenario = load_scenario(args.scenario) if args.scenario else Scenario()
    devices = scenario.devices
    if args.devices is not None:
        if args.devices < 1:
            raise CommandError("--devices must be >= 1")
        devices = replace(devices, count=args.devices)
    if args.limit is not None:
        if args.limit < 1:
            raise CommandError("--limit must be >= 1")
        devices = replace(devices, limit=args.limit)
    scenario = replace(scenario, devices=devices)
    if args.seed is not None:
        scenario = replace(scenario, seed=args.seed)
    if args.operating_point:
        scenario = replace(scenario, operating_point=args.operating_point)
    return scenario


def run(args: argparse.Namespace) -> int:
    from adaptedge.cli.errors import CommandError
    from adaptedge.cli.evaluate import check_split, recipe_validation, replay_seed
    from adaptedge.protocol.bundle import open_bundle, verify
    from adaptedge.simulator.hil import HilOptions, run_hil
    from adaptedge.simulator.report import evaluate, summary_table, write_report
    from adaptedge.trainer.data.bundle_data import load_for_bundle

    scenario = load_scenario_args(args)
    progress = not args.no_progress and sys.stderr.isatty()
    with open_bundle(args.bundle) as root:
        manifest = verify(root)
        seed = replay_seed(manifest.split, args.data)  # the rows it was not trained on
        dataset = load_for_bundle(args.data, manifest, target=args.target, seed=seed)
        dataset = recipe_validation(manifest.split, dataset, seed)  # train --val-fraction's
        check_split(manifest.split, dataset, seed)
        X, y = dataset.split(args.split)
        if manifest.is_regression:  # scored on the target, in its unit
            y = dataset.targets(args.split)
        if X.shape[1] != len(manifest.feature_names):
            raise CommandError(f"dataset {args.data!r} has {X.shape[1]} features but bundle "
                               f"{manifest.bundle_id} takes {len(manifest.feature_names)}: "
                               "simulate a bundle on the data it was trained for")
        point = scenario.operating_point
        if point is not None and point not in {p.name for p in manifest.operating_points}:
            raise CommandError(f"operating point {point!r} is not in the bundle; it has "
                               f"{[p.name for p in manifest.operating_points]}")
        main = None
        if args.hil:
            main = run_hil(root, args.data, scenario=scenario, truth=y, rows=X,
                           progress=progress,
                           options=HilOptions(devices=scenario.devices.count,
                                              limit=scenario.devices.limit or None,
                                              broker=args.broker, split=args.split,
                                              target=args.target,
                                              outage_mode=args.outage_mode,
                                              timeout_s=args.timeout,
                                              remote_sensors=args.remote_sensors))
        compare = [Path(c) for c in args.compare]
        data = evaluate(root, X, y, scenario=scenario, main=main, compare=compare,
                        frontier_rows=len(X),
                        progress=progress)
        paths = write_report(data, args.report, extra={"scenario": scenario.to_dict(),
                                                       "dataset": args.data,
                                                       "split": args.split})
    import json

    body = json.loads(paths["json"].read_text())
    print(summary_table(body))
    print(f"report: {paths['markdown']}")
    return 0
