"""Replay speed: decisions per second of ``simulator.replay``, batched and per row, same session.

Prints one JSON object with three bundles: ``toy`` (the 3-feature one-node gate bundle of
``tests/support/toy_bundle.py``: a toy, its speed says nothing about a trained bundle),
``trained_adapt_gbrt`` (letter-binary, ``adapt-gbrt`` default sweep, HPC ``auto``) and
``trained_dag`` (letter-binary, ``dag`` default sweep, HPC ``auto``). The two trained bundles
are trained once per benchmark run with ``train_bundle`` (``--jobs`` the usable cores; an HPC
fit already in the user's cache is reused), unless ``--adapt-bundle DIR`` / ``--dag-bundle
DIR`` give them. Each is replayed at its default operating point on the test split tiled to
``--rows`` rows, one device, the default scenario (20 Hz, the bundle's round trip).

Per bundle, in one ``ReplaySession`` whose HPC answers start empty (a temporary cache
directory): ``session_s`` (verify + nothing else), ``cold_replay_decisions_per_s`` (the first
batched replay: node sessions made and every escalated row asked of the HPC),
``replay_decisions_per_s`` (the median of REPEATS further batched replays: the HPC's answers
come from the session's cache), ``per_row_decisions_per_s`` (``batched=False``: the real
``EdgeRuntime`` row by row and the cloud's ``HpcInference``, on ``--per-row-rows`` rows, median
of REPEATS) and ``equal_decisions``: every column of every decision (label, source,
escalation, sensors read, request id, start time, latency, energy) and the run's duration of
the batched replay equal the per-row replay's on those rows. ``*_per_cpu_s``: the same per
second of this process's CPU time (what a shared machine's other jobs do not take away);
``threads``: the threads a batched model call's row chunks ran on (``simulator.row_chunks``:
the usable cores).
Run: ``python -m benchmarks.simulate [--rows N] [--adapt-bundle DIR] [--dag-bundle DIR]``.
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

REPEATS = 3
COLUMNS = ("device", "row", "t_start", "latency_ms", "label", "truth", "source", "escalated",
           "sent", "sensors", "request_id", "energy_mj")


def timed(fn: Any) -> tuple[Any, float, float]:
    """``fn()``, its wall seconds and this process's CPU seconds."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, max(time.process_time() - c, 1e-9)


def same_decisions(fast: Any, slow: Any) -> bool:
    """Every column of every decision, and the run's duration, equal."""
    return fast.n == slow.n and fast.duration_s == slow.duration_s and all(
        list(getattr(fast.columns, c)) == list(getattr(slow.columns, c)) for c in COLUMNS)


def measure(bundle: Path, X: Any, y: Any, point: str, per_row_rows: int,
            cache_dir: Path) -> dict[str, Any]:
    """Speeds of the batched and the per-row replay of ``bundle`` in one session."""
    from adaptedge.simulator.replay import replay
    from adaptedge.simulator.replay_session import ReplaySession

    session, session_s, _ = timed(lambda: ReplaySession(bundle, cache_dir=cache_dir))
    n, k = len(X), per_row_rows
    run, cold_s, cold_cpu = timed(lambda: replay(session, X, y, operating_point=point))
    hpc_rows_cold = session.answers.computed
    fast, fast_cpu, slow, slow_cpu = [], [], [], []
    slow_run = None
    for _ in range(REPEATS):
        _, w, c = timed(lambda: replay(session, X, y, operating_point=point))
        fast.append(n / w)
        fast_cpu.append(n / c)
        slow_run, w, c = timed(lambda: replay(session, X[:k], y[:k], operating_point=point,
                                              batched=False))
        slow.append(k / w)
        slow_cpu.append(k / c)
    equal = same_decisions(replay(session, X[:k], y[:k], operating_point=point), slow_run)
    m = session.manifest
    fast_p50, slow_p50 = statistics.median(fast), statistics.median(slow)
    return {
        "replay_decisions_per_s": round(fast_p50, 1),
        "per_row_decisions_per_s": round(slow_p50, 1),
        "equal_decisions": equal,
        "equal_decisions_rows": k,
        "speedup": round(fast_p50 / slow_p50, 1),
        "replay_decisions_per_cpu_s": round(statistics.median(fast_cpu), 1),
        "per_row_decisions_per_cpu_s": round(statistics.median(slow_cpu), 1),
        "cold_replay_decisions_per_s": round(n / cold_s, 1),
        "cold_replay_decisions_per_cpu_s": round(n / cold_cpu, 1),
        "session_s": round(session_s, 3),
        "threads": session.models.threads,
        "hpc_rows_computed": {"cold": hpc_rows_cold, "after_repeats": session.answers.computed},
        "decisions": n, "per_row_decisions": k, "operating_point": point,
        "policy_nodes": len(m.policies[m.operating_point(point).policy].nodes),
        "escalation_rate": round(run.escalation_rate(), 4),
        "cloud_answer_rate": round(run.rate("cloud"), 4),
    }


def tiled(X: Any, y: Any, rows: int) -> tuple[Any, Any]:
    reps = int(np.ceil(rows / len(X)))
    return (np.ascontiguousarray(np.tile(X, (reps, 1))[:rows], dtype=np.float32),
            np.tile(y, reps)[:rows])


def trained(method: str, out: Path) -> tuple[Path, float]:
    """A letter-binary bundle of ``method``'s default sweep, and its training wall seconds."""
    from adaptedge.trainer.api import train_bundle
    from adaptedge.trainer.parallel import usable_cores

    started = time.perf_counter()
    train_bundle("letter-binary", method, out, n_jobs=usable_cores(), progress=False)
    return out, time.perf_counter() - started


def trained_entry(name: str, method: str, given: str | None, tmp: Path, X: Any, y: Any,
                  args: argparse.Namespace) -> dict[str, Any]:
    from adaptedge.protocol.bundle import verify

    if given:
        bundle, how = Path(given), f"given: {given}"
    else:
        bundle, seconds = trained(method, tmp / name)
        how = f"trained in this run ({seconds:.0f} s wall)"
    point = verify(bundle).default_operating_point
    return {"bundle": f"letter-binary {method} (default sweep, HPC auto; {how})",
            **measure(bundle, X, y, point, args.per_row_rows, tmp / f"{name}-cache")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--adapt-bundle", help="letter-binary adapt-gbrt bundle (default: train)")
    parser.add_argument("--dag-bundle", help="letter-binary dag bundle (default: train)")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--per-row-rows", type=int, default=10_000)
    args = parser.parse_args()

    from adaptedge.trainer.data.datasets import load_dataset
    from tests.support.toy_bundle import build_toy_bundle

    with tempfile.TemporaryDirectory(prefix="adaptedge-bench-") as name:
        tmp = Path(name)
        build_toy_bundle(tmp / "toy")
        Xt = np.random.default_rng(0).normal(size=(args.rows, 3)).astype(np.float32)
        yt = (Xt[:, 0] > 0).astype(np.int64)
        toy = {"bundle": "TOY: one-node gate on 3 features (tests/support/toy_bundle.py)",
               **measure(tmp / "toy", Xt, yt, "gate", args.per_row_rows, tmp / "toy-cache")}
        X, y = tiled(*load_dataset("letter-binary").split("test"), args.rows)
        adapt = trained_entry("adapt", "adapt-gbrt", args.adapt_bundle, tmp, X, y, args)
        dag = trained_entry("dag", "dag", args.dag_bundle, tmp, X, y, args)
    print(json.dumps({"toy": toy, "trained_adapt_gbrt": adapt, "trained_dag": dag,
                      "repeats": REPEATS, "statistic": "median",
                      "load_average_1min": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
