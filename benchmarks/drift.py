"""The gas drift scenario (``simulator.drift``); prints one JSON object.

    python -m benchmarks.drift [--seed S] [--audit-fraction F] [--null-streams N] [--out DIR]

Train on gas batches 1-2 (ADAPT-GBRT, quick sweep, the trainer's default rule on validation),
stream the batches 1-2 test rows then batches 3, 4, 5, 6, 8, 9 through the batched replay with
audit sampling, run the drift monitor (cloud.drift), recalibrate from the escalated and audit
rows seen up to the first alarm after batch 3's start + 500 decisions, and report: accuracy
and escalation per batch, the alarm delay, accuracy before/after recalibration on the rest of
the stream with the audit cost it needed, and the false-alarm rate on no-drift replays.
Writes drift.json, drift.md and drift.png (bundles and rows go to a temporary directory) into ``--out`` (default benchmarks/results/drift).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.drift")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--audit-fraction", type=float, default=0.05)
    parser.add_argument("--audit-seed", type=int, default=0)
    parser.add_argument("--null-streams", type=int, default=200)
    parser.add_argument("--null-length", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/drift"))
    args = parser.parse_args(argv)

    from benchmarks.gas_drift.report import write_report
    from benchmarks.gas_drift.run import run_scenario
    from benchmarks.gas_drift.stream import DriftConfig

    started = time.perf_counter()
    config = DriftConfig(seed=args.seed, audit_fraction=args.audit_fraction,
                         audit_seed=args.audit_seed)
    with tempfile.TemporaryDirectory() as work:  # bundles and rows: not results
        summary = run_scenario(Path(work), config, null_streams=args.null_streams,
                               null_length=args.null_length)
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    write_report(summary, args.out)
    print(json.dumps(summary, indent=2, default=str))
    return summary


if __name__ == "__main__":
    main()
