"""``adaptedge demo``: the whole system on one machine in about a minute.

Trains a small bundle on a vendored dataset (a quick sweep; cached under ``--workdir``, so a
second run reuses it), starts the embedded MQTT broker, the cloud service and three edge
devices as separate processes, replays the test split through them, and prints accuracy and
cost against always-cloud and always-local, the escalation rate and latency percentiles, and
where the report (report.md, report.json, PNG plots) lies. Leaves no process behind.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from adaptedge.trainer.data.cache import cache_root


def default_workdir() -> Path:
    """The demo's part of the cache, read when the command runs (tests move the cache)."""
    return cache_root() / "demo"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo", help="train a small bundle, run broker + cloud + 3 devices, print a summary",
        description=__doc__)
    p.add_argument("--workdir", type=Path,
                   help="cache of bundles and reports (default: demo/ in the adaptedge cache, "
                   "see adaptedge cache info)")
    p.add_argument("--data", default="wall-robot", help="built-in dataset (default wall-robot)")
    p.add_argument("--method", default="adapt-gbrt", help="training method (default adapt-gbrt)")
    p.add_argument("--devices", type=int, default=3, help="edge device processes (default 3)")
    p.add_argument("--limit", type=int, default=150, help="rows each device replays (default 150)")
    p.add_argument("--rate", type=float, default=50.0, help="decisions/s per device (default 50)")
    p.add_argument("--broker", default="amqtt",
                   help="amqtt (embedded, default), mosquitto, or mqtt://HOST:PORT")
    p.add_argument("--quick", action="store_true",
                   help="a short run for tests: 40 rows per device at 100/s")
    p.add_argument("--bundle", type=Path,
                   help="use this bundle (trained on --data) instead of training one")
    p.add_argument("--retrain", action="store_true", help="train again even if cached")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300.0, help="give up on the devices after S s")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(handler=run)


def _say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def obtain_bundle(workdir: Path, data: str, method: str, *, seed: int, retrain: bool,
                  progress: bool) -> tuple[Path, str]:
    """The cached bundle, or a freshly trained one (``trainer.api.train_bundle``, quick)."""
    from adaptedge.protocol.bundle import verify
    from adaptedge.protocol.errors import BundleError
    from adaptedge.trainer.api import train_bundle

    kind = f"{method} (quick sweep)"
    out = workdir / "bundles" / f"{data}-{method}-quick-s{seed}"
    if out.exists() and not retrain:
        try:
            verify(out)
            return out, f"{kind}, cached"
        except BundleError:
            _say(f"cached bundle {out} does not verify; training it again")
    started = time.monotonic()
    _say(f"training {method} on {data} (quick sweep) -> {out}")
    # the demo's own cache slot: replacing the (stale) bundle there is --retrain's job
    train_bundle(data, method, out, quick=True, seed=seed, n_jobs=1, progress=progress,
                 force=True)
    return out, f"{kind}, trained in {time.monotonic() - started:.1f} s"


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from adaptedge.cli.errors import CommandError
    from adaptedge.simulator.hil import HilOptions, run_hil
    from adaptedge.simulator.report import evaluate, summary_table, write_report
    from adaptedge.simulator.scenario import DevicesConfig, Scenario
    from adaptedge.trainer.data.datasets import load_dataset

    if args.devices < 1 or args.limit < 1 or args.rate <= 0:
        raise CommandError("--devices and --limit must be >= 1 and --rate > 0")
    limit, rate = (40, 100.0) if args.quick else (args.limit, args.rate)
    progress = not args.no_progress and sys.stderr.isatty()
    workdir: Path = args.workdir or default_workdir()
    workdir.mkdir(parents=True, exist_ok=True)
    dataset = load_dataset(args.data)
    X, y = dataset.split("test")
    limit = min(limit, len(X))
    if args.bundle is not None:
        bundle, how = args.bundle, "given with --bundle"
    else:
        bundle, how = obtain_bundle(workdir, args.data, args.method, seed=args.seed,
                                    retrain=args.retrain, progress=progress)
    _say(f"bundle {bundle} ({how})")
    scenario = Scenario(seed=args.seed, devices=DevicesConfig(count=args.devices, rate_hz=rate,
                                                              limit=limit), name="demo")
    run_dir = workdir / "runs" / time.strftime("%Y%m%d-%H%M%S")
    _say(f"starting the {args.broker} broker, the cloud service and {args.devices} devices "
         f"({limit} rows each at {rate:g}/s)")
    hil = run_hil(bundle, args.data, scenario=scenario, truth=y, progress=progress,
                  options=HilOptions(devices=args.devices, limit=limit, rate_hz=rate,
                                     broker=args.broker, workdir=run_dir,
                                     timeout_s=args.timeout))
    _say(f"{hil.n} decisions in {hil.wall_s:.1f} s; scoring and writing the report")
    data = evaluate(bundle, X, y, scenario=replace(scenario, devices=replace(
        scenario.devices, count=1)), main=hil, frontier_rows=len(X), progress=progress,
        title=f"adaptedge demo: {args.data}, {how}")
    report_dir = workdir / "report"
    paths = write_report(data, report_dir, extra={"dataset": args.data, "bundle": str(bundle),
                                                  "scenario": scenario.to_dict()})
    body = json.loads(paths["json"].read_text())
    print()
    print(summary_table(body))
    print()
    print(f"report: {paths['markdown']} (plots: {', '.join(sorted(body['plots'].values()))})")
    return 0
