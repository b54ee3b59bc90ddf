"""``adaptedge drift-scenario --out DIR``: the gas sensor drift scenario in the simulator.

Trains on gas batches 1-2, streams their held-out rows and then batches 3-9 in time order
through the batched replay with audit sampling, runs the drift monitor, recalibrates from the
rows seen up to the alarm plus a window, and writes DIR/drift.md, drift.png and drift.json
(plus the bundles and the rows). Seeds are stated in the report.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("drift-scenario", help="simulate gas sensor drift: alarm, recalibrate",
                       description=__doc__)
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--method", default="adapt-gbrt")
    p.add_argument("--seed", type=int, default=0, help="split, HPC and method seed")
    p.add_argument("--audit-fraction", type=float, default=0.05)
    p.add_argument("--audit-seed", type=int, default=0)
    p.add_argument("--window", type=int, default=500,
                   help="decisions after the alarm whose rows recalibration may use")
    p.add_argument("--null-streams", type=int, default=200,
                   help="no-drift resampled streams for the false-alarm measurement")
    p.add_argument("--full", action="store_true", help="the method's full sweep (slow)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from adaptedge.simulator.drift import DriftConfig
    from adaptedge.simulator.drift_report import write_report
    from adaptedge.simulator.drift_run import run_scenario

    config = DriftConfig(method=args.method, seed=args.seed, quick=not args.full,
                         audit_fraction=args.audit_fraction, audit_seed=args.audit_seed,
                         window=args.window)
    summary = run_scenario(args.out, config, null_streams=args.null_streams)
    print(f"wrote {write_report(summary, args.out)}")
    return 0
