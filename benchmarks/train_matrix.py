"""Training time of every method on every built-in dataset: ``train --quick`` and, with
``--default``, the default sweep, each as the user runs it (``adaptedge train`` in a
subprocess, ``--jobs`` the usable cores). Prints one JSON object.

    python -m benchmarks.train_matrix [--datasets A,B] [--methods M,N] [--default]
                                      [--timeout S] [--out FILE]

Per (dataset, method, sweep): ``wall_s``, ``cpu_s`` (the subprocess tree's user + system
seconds: what other jobs on a shared machine do not take away), the exit status, the number of
validation points and, for a refusal (exit 2), its one-line message. The HPC of each dataset is
fitted once, cold, by a first ``--method static --quick`` run (regression: ``confidence``) in a
fresh cache (its time is ``hpc_fit``); every timed run after it reuses that fit, as a user's
second ``train`` does.
With ``--default``, ``dominates`` says whether the default sweep's validation front dominates or
equals ``--quick``'s: every quick point has a default point at least as accurate (regression:
MAE at most as large) and at most as costly, both measured on the selection rows of validation.
``load_before`` / ``load_after``: the 1-minute load average. Nothing here reads test rows.
With ``--out``, the file is rewritten after every run (``"complete": false`` until the last),
so a long matrix stopped part-way keeps the runs it finished.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TIMEOUT_S = 900.0
"""A run still going after this is stopped and recorded as ``timeout`` (bounded loops)."""


def methods_for(dataset: str) -> list[str]:
    """The methods ``train`` offers (``auto`` excluded: it runs the others)."""
    from adaptedge.trainer.data.regression_datasets import REGRESSION_BUILTINS
    from adaptedge.trainer.methods.registry import METHOD_MODULES
    from adaptedge.trainer.methods.regression import REGRESSION_METHODS

    names = REGRESSION_METHODS if dataset in REGRESSION_BUILTINS else tuple(METHOD_MODULES)
    return sorted(m for m in names if m != "auto")


def hpc_method(dataset: str) -> str:
    """The method whose ``--quick`` run fits a dataset's HPC cold: ``static`` (classification)
    or ``confidence``, the regression method that also serves classification."""
    return "static" if "static" in methods_for(dataset) else "confidence"


def timed_train(dataset: str, method: str, out: Path, quick: bool, env: dict[str, str],
                timeout: float) -> dict[str, Any]:
    """One ``adaptedge train`` in a subprocess: wall and CPU seconds, status, points."""
    cmd = [sys.executable, "-m", "adaptedge.cli.main", "train", "--data", dataset,
           "--method", method, "--out", str(out), *(["--quick"] if quick else [])]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # its own process group: on a timeout the run's joblib workers, which hold its pipes
    # open, are stopped with it (else reading the pipes would wait for them)
    with subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as child:
        try:
            stderr = child.communicate(timeout=timeout)[1]
            status: int | str = child.returncode
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            status, stderr = "timeout", ""
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row: dict[str, Any] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "status": status}
    if status == 0:
        row["points"] = validation_points(out)
    elif stderr:
        row["message"] = stderr.strip().splitlines()[-1][:300]
    return row


def validation_points(bundle: Path) -> list[list[float]]:
    """Each operating point's (error, cost) on the selection rows: 1 - accuracy, or MAE."""
    from adaptedge.protocol import verify

    manifest = verify(bundle)
    return [[float(p.mae) if manifest.is_regression and p.mae is not None
             else 1.0 - float(p.accuracy), float(p.cost)]
            for p in manifest.operating_points]


def dominates(default: list[list[float]], quick: list[list[float]]) -> bool:
    """Every quick point has a default point with error <= and cost <= its own."""
    return all(any(d[0] <= q[0] + 1e-12 and d[1] <= q[1] + 1e-12 for d in default)
               for q in quick)


def run_dataset(dataset: str, methods: list[str], default: bool, timeout: float,
                tmp: Path, entry: dict[str, Any],
                after_run: Callable[[], None] | None = None) -> None:
    """The HPC's cold fit, then every method quick (and default), in one fresh cache, into
    ``entry`` run by run; ``after_run``: called after each run."""
    env = {**os.environ, "ADAPTEDGE_CACHE_DIR": str(tmp / f"cache-{dataset}"),
           "ADAPTEDGE_PROGRESS_EVERY": "0"}
    entry["hpc_fit"] = timed_train(dataset, hpc_method(dataset), tmp / f"{dataset}-hpc", True,
                                   env, timeout)
    entry["hpc_fit"].pop("points", None)
    for method in methods:
        row: dict[str, Any] = {}
        entry[method] = row
        for sweep in ("quick", "default") if default else ("quick",):
            out = tmp / f"{dataset}-{method}-{sweep}"
            row[sweep] = timed_train(dataset, method, out, sweep == "quick", env, timeout)
            print(f"{dataset} {method} {sweep}: {row[sweep]['status']} "
                  f"{row[sweep]['wall_s']} s wall, {row[sweep]['cpu_s']} CPU s",
                  file=sys.stderr, flush=True)
            if default and all("points" in row.get(s, {}) for s in ("quick", "default")):
                row["dominates"] = dominates(row["default"]["points"], row["quick"]["points"])
            if after_run is not None:
                after_run()


def summary(results: dict[str, Any]) -> dict[str, Any]:
    """The slowest runs per sweep and how many exceed the issue's limits (60 s, 300 s)."""
    out: dict[str, Any] = {}
    for sweep, limit in (("quick", 60.0), ("default", 300.0)):
        runs = [(d, m, r[sweep]) for d, entry in results.items() for m, r in entry.items()
                if m != "hpc_fit" and sweep in r]
        if not runs:
            continue
        ok = [(d, m, r) for d, m, r in runs if r["status"] == 0]
        out[sweep] = {"runs": len(runs), "trained": len(ok),
                      "over_limit": sorted(f"{d}/{m}: {r['wall_s']} s" for d, m, r in ok
                                           if r["wall_s"] > limit),
                      "slowest": sorted(((r["wall_s"], f"{d}/{m}") for d, m, r in ok),
                                        reverse=True)[:5]}
    return out


def report(results: dict[str, Any], load_before: float, complete: bool) -> dict[str, Any]:
    """The printed (and written) JSON object of the runs in ``results`` so far."""
    return {"cores": os.cpu_count(), "complete": complete, "load_before": load_before,
            "load_after": os.getloadavg()[0], "summary": summary(results), "results": results}


def write_report(path: Path, content: dict[str, Any]) -> None:
    """``content`` as JSON at ``path``, replaced whole (a reader never sees half a file)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(content, indent=1) + "\n")
    partial.replace(path)


def main() -> None:
    from adaptedge.trainer.data.builtin_datasets import BUILTINS
    from adaptedge.trainer.data.regression_datasets import REGRESSION_BUILTINS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=",".join([*BUILTINS, *REGRESSION_BUILTINS]))
    ap.add_argument("--methods", help="comma-separated (default: every method that applies)")
    ap.add_argument("--default", action="store_true", help="also the default sweeps")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S)
    ap.add_argument("--out", type=Path, help="also write the JSON here, after every run")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    load_before = os.getloadavg()[0]
    out_file: Path | None = args.out

    def save() -> None:
        if out_file is not None:
            write_report(out_file, report(results, load_before, complete=False))

    with tempfile.TemporaryDirectory(prefix="train-matrix-") as tmp:
        for dataset in args.datasets.split(","):
            chosen = methods_for(dataset)
            if args.methods:
                chosen = [m for m in chosen if m in args.methods.split(",")]
            results[dataset] = {}
            run_dataset(dataset, chosen, args.default, args.timeout, Path(tmp),
                        results[dataset], save)
    final = report(results, load_before, complete=True)
    if out_file is not None:
        write_report(out_file, final)
    print(json.dumps(final, indent=1))

if __name__ == "__main__":
    main()
