"""Replay speed: decisions per second of ``simulator.replay``, batched and per row, same run.

Prints one JSON object with, for a one-node bundle (the toy gate bundle of
``tests/support/toy_bundle.py``, or ``--bundle DIR --data NAME``) and for a letter-binary DAG
bundle (``--dag-bundle DIR``, else trained here: ``dag`` method, quick sweep, logistic node
classifiers and HPC), ``replay_decisions_per_s`` (the batched replay, the default) and
``per_row_decisions_per_s`` (``batched=False``: the real ``EdgeRuntime`` row by row) on the same
rows, the median of REPEATS runs each on a shared machine, with the real ``HpcInference`` on the
per-row path, the default scenario's network (20 Hz, the bundle's round trip) and one device.
``*_per_cpu_s``: the same per second of this process's CPU time (what a shared machine's other
jobs do not take away).
Run: ``python -m benchmarks.simulate [--rows N] [--bundle DIR --data NAME] [--dag-bundle DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REPEATS = 5


def measure(bundle: Path, X: Any, y: Any, point: str, per_row_rows: int) -> dict[str, Any]:
    """Median decisions/s of the batched and the per-row replay on the same rows."""
    from adaptedge.protocol.bundle import verify
    from adaptedge.simulator.replay import replay

    manifest = verify(bundle)
    replay(bundle, X[:200], y[:200], operating_point=point)  # warm-up (imports, sessions)
    replay(bundle, X[:200], y[:200], operating_point=point, batched=False)
    fast, slow, fast_cpu, slow_cpu = [], [], [], []
    run = None
    for _ in range(REPEATS):
        t, c = time.perf_counter(), time.process_time()
        run = replay(bundle, X, y, operating_point=point)
        fast.append(len(X) / (time.perf_counter() - t))
        fast_cpu.append(len(X) / max(time.process_time() - c, 1e-9))
        t, c = time.perf_counter(), time.process_time()
        replay(bundle, X[:per_row_rows], y[:per_row_rows], operating_point=point, batched=False)
        slow.append(per_row_rows / (time.perf_counter() - t))
        slow_cpu.append(per_row_rows / max(time.process_time() - c, 1e-9))
    assert run is not None
    fast_p50, slow_p50 = statistics.median(fast), statistics.median(slow)
    return {
        "replay_decisions_per_s": round(fast_p50, 1),
        "per_row_decisions_per_s": round(slow_p50, 1),
        "speedup": round(fast_p50 / slow_p50, 1),
        "replay_decisions_per_cpu_s": round(statistics.median(fast_cpu), 1),
        "per_row_decisions_per_cpu_s": round(statistics.median(slow_cpu), 1),
        "decisions": len(X), "per_row_decisions": per_row_rows,
        "operating_point": point,
        "policy_nodes": len(manifest.policies[manifest.operating_point(point).policy].nodes),
        "escalation_rate": round(run.escalation_rate(), 4),
        "cloud_answer_rate": round(run.rate("cloud"), 4),
    }


def tiled(X: Any, y: Any, rows: int) -> tuple[Any, Any]:
    reps = int(np.ceil(rows / len(X)))
    return (np.ascontiguousarray(np.tile(X, (reps, 1))[:rows], dtype=np.float32),
            np.tile(y, reps)[:rows])


def dag_bundle(out: Path) -> Path:
    """A letter-binary DAG bundle: quick sweep, logistic node classifiers and HPC (~1 min)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.export.bundle import export_bundle
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.registry import MethodOptions, get_method

    dataset = load_dataset("letter-binary")
    hpc = fit_hpc(dataset, kind=make_pipeline(StandardScaler(), LogisticRegression(
        max_iter=2000)), cache=False)
    exports = get_method("dag")(dataset, hpc, MethodOptions(quick=True, extra={
        "classifier": "lr"}))
    export_bundle(out, dataset, hpc, exports)
    return out


def deepest_point(bundle: Path) -> str:
    """The operating point whose policy has the most nodes (ties: the more accurate)."""
    from adaptedge.protocol.bundle import verify

    m = verify(bundle)
    return max(m.operating_points,
               key=lambda p: (len(m.policies[p.policy].nodes), p.accuracy)).name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bundle", help="one-node bundle directory (default: toy gate bundle)")
    parser.add_argument("--data", help="dataset of --bundle")
    parser.add_argument("--operating-point", default=None)
    parser.add_argument("--dag-bundle", help="letter-binary DAG bundle (default: train one)")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--per-row-rows", type=int, default=10_000)
    args = parser.parse_args()

    from adaptedge.protocol.bundle import verify
    from adaptedge.trainer.data.datasets import load_dataset

    tmp = tempfile.TemporaryDirectory(prefix="adaptedge-bench-")
    if args.bundle:
        if not args.data:
            parser.error("--bundle needs --data")
        bundle = Path(args.bundle)
        X, y = tiled(*load_dataset(args.data).split("test"), args.rows)
        point = args.operating_point or verify(bundle).default_operating_point
        kind = f"{args.data} bundle"
    else:
        from tests.support.toy_bundle import build_toy_bundle

        bundle = Path(tmp.name) / "toy"
        build_toy_bundle(bundle)
        X = np.random.default_rng(0).normal(size=(args.rows, 3)).astype(np.float32)
        y = (X[:, 0] > 0).astype(np.int64)
        point = args.operating_point or "gate"
        kind = "toy one-node gate bundle (tests/support/toy_bundle.py)"
    one_node = {"bundle": kind, **measure(bundle, X, y, point, args.per_row_rows)}
    dag = Path(args.dag_bundle) if args.dag_bundle else dag_bundle(Path(tmp.name) / "dag")
    Xd, yd = tiled(*load_dataset("letter-binary").split("test"), args.rows)
    dag_point = deepest_point(dag)
    dag_run = {"bundle": "letter-binary DAG (dag method, quick, lr)",
               **measure(dag, Xd, yd, dag_point, args.per_row_rows)}
    print(json.dumps({"one_node": one_node, "letter_binary_dag": dag_run,
                      "repeats": REPEATS, "statistic": "median",
                      "load_average_1min": round(os.getloadavg()[0], 2)}))
    tmp.cleanup()


if __name__ == "__main__":
    main()
