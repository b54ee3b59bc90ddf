"""Replay speed: decisions per second of ``simulator.replay`` on a one-node (gate) bundle.

Prints one JSON object with ``replay_decisions_per_s`` (best of REPEATS on a shared machine, the real
``EdgeRuntime`` and ``HpcInference``, the default scenario's ideal network) plus the
escalation rate of the measured run and, for context, the edge runtime's own local-only
speed on the same rows. Run: ``python -m benchmarks.simulate [--bundle DIR --data NAME]``;
without ``--bundle`` it uses the toy one-node bundle from ``tests/support/toy_bundle.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REPEATS = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bundle", help="bundle directory (default: toy one-node bundle)")
    parser.add_argument("--data", help="dataset of the bundle (with --bundle)")
    parser.add_argument("--operating-point", default=None)
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()

    from adaptedge.edge import EdgeRuntime
    from adaptedge.protocol.bundle import verify
    from adaptedge.simulator.replay import replay

    tmp = tempfile.TemporaryDirectory(prefix="adaptedge-bench-")
    if args.bundle:
        bundle = Path(args.bundle)
        if not args.data:
            parser.error("--bundle needs --data")
        from adaptedge.trainer.datasets import load_dataset

        X, y = load_dataset(args.data).split("test")
        reps = int(np.ceil(args.rows / len(X)))
        X, y = np.tile(X, (reps, 1))[: args.rows], np.tile(y, reps)[: args.rows]
        point = args.operating_point
        kind = f"{args.data} bundle"
    else:
        sys.path.insert(0, str(ROOT / "tests"))
        from support.toy_bundle import build_toy_bundle

        bundle = Path(tmp.name) / "toy"
        build_toy_bundle(bundle)
        rng = np.random.default_rng(0)
        X = rng.normal(size=(args.rows, 3)).astype(np.float32)
        y = (X[:, 0] > 0).astype(np.int64)
        point = args.operating_point or "gate"
        kind = "toy one-node gate bundle (tests/support/toy_bundle.py)"
    manifest = verify(bundle)
    point = point or manifest.default_operating_point
    nodes = len(manifest.policies[manifest.operating_point(point).policy].nodes)
    X = np.ascontiguousarray(X, dtype=np.float32)

    replay(bundle, X[:200], y[:200], operating_point=point)  # warm-up (imports, sessions)
    best = 0.0
    run = None
    for _ in range(REPEATS):
        t = time.perf_counter()
        run = replay(bundle, X, y, operating_point=point)
        best = max(best, len(X) / (time.perf_counter() - t))
    assert run is not None

    rt = EdgeRuntime.load(bundle, operating_point=point)
    local_best = 0.0
    for _ in range(REPEATS):
        t = time.perf_counter()
        for row in X:
            rt.predict_row(row)
        local_best = max(local_best, len(X) / (time.perf_counter() - t))

    print(json.dumps({
        "replay_decisions_per_s": round(best, 1),
        "decisions": len(X),
        "bundle": kind,
        "operating_point": point,
        "policy_nodes": nodes,
        "escalation_rate": round(run.escalation_rate(), 4),
        "cloud_answer_rate": round(run.rate("cloud"), 4),
        "edge_runtime_local_only_decisions_per_s": round(local_best, 1),
        "repeats": REPEATS,
    }))
    tmp.cleanup()


if __name__ == "__main__":
    main()
