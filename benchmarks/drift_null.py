"""The drift monitor's false-alarm rate on simulated no-drift streams; prints one JSON object.

    python -m benchmarks.drift_null [--streams N] [--length L] [--seed S]

Worst-case null: every stream sits exactly at the in-control bound of each chart (escalation
at the upper end of its 99% validation interval, audited agreement at the lower end), 10% of
decisions audited. Reference: escalation 0.1 on 300 validation rows, local agreement 0.9 on
250. For each design (false-alarm probability alpha within ``L`` decisions) it reports the
share of streams with any alarm within ``L`` decisions next to alpha.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from adaptedge.cloud.fleet.drift import DriftDesign, DriftMonitor
from adaptedge.protocol.drift_reference import Reference


def false_alarm_share(design: DriftDesign, length: int, streams: int, seed: int) -> float:
    reference = Reference(0.1, 300, 0.9, 250)
    probe = DriftMonitor(reference, design)
    p_up = probe.charts["escalation", "up"].p0
    p_agree = probe.charts["agreement", "down"].p0
    rng = np.random.default_rng(seed)
    fired = 0
    for _ in range(streams):
        monitor = DriftMonitor(reference, design)
        esc = (rng.random(length) < p_up).tolist()
        agree = (rng.random(length) < p_agree).tolist()
        audit = (rng.random(length) < 0.1).tolist()
        for i in range(length):
            if monitor.observe_decision(esc[i]) is not None or (
                    audit[i] and monitor.observe_audit(agree[i]) is not None):
                fired += 1
                break
    return fired / streams


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.drift_null")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--length", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("adaptedge.cloud.fleet.drift").setLevel(logging.ERROR)  # alarms are counted
    rows = []
    for alpha in (0.01, 0.05, 0.2):
        design = DriftDesign(false_alarm=alpha, horizon=args.length)
        rows.append({"designed_alpha": alpha, "horizon": args.length,
                     "threshold": DriftMonitor(Reference(0.1, 300, 0.9, 250), design).threshold,
                     "measured": false_alarm_share(design, args.length, args.streams,
                                                   args.seed)})
    out = {"streams": args.streams, "length": args.length, "seed": args.seed, "designs": rows}
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
