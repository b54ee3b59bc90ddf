"""Sweep wall time here (``--jobs 1``) vs a local Dask cluster of 1 and 2 worker processes;
prints one JSON object.

    python -m benchmarks.train_cluster [--quick] [--dataset letter-binary] [--method adapt-gbrt]
                                       [--out FILE]

The HPC is fitted (or loaded from the cache) first and not timed. Each run is the method's
sweep alone (``get_method(method)(dataset, hpc, options)``), the same call ``adaptedge train``
makes: locally with ``n_jobs=1``, then inside ``trainer.parallel.use_cluster`` on a
``LocalCluster`` (processes, one thread each, 127.0.0.1) with 1 and 2 workers. Worker start-up
and the first import of the trainer on the workers are timed apart (``start_seconds``,
``warm_seconds``); ``sweep_seconds`` is the sweep, ``cpu_seconds`` the CPU time it took in
this process and (on a cluster) in the workers, which a busy machine inflates less. Per run: ``best_within_1pct`` (the
cheapest candidate within 1% of the HPC's validation accuracy, as ``adaptedge train``'s
default) and whether every candidate's validation metrics equal the local run's
(``same_candidates``). ``--quick``: heart and the method's quick sweep (a smoke run). The
machine's 1-minute load average before and after each run is recorded: on a shared machine
the ratios mean little when it is high.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _best(policies: list[Any], hpc_accuracy: float) -> dict[str, Any] | None:
    ok = [p for p in policies if p.validation.accuracy >= hpc_accuracy - 0.01]
    if not ok:
        return None
    p = min(ok, key=lambda p: (p.validation.cost, -p.validation.accuracy))
    return {"name": p.name, "validation_accuracy": p.validation.accuracy,
            "validation_cost": p.validation.cost}


def _sweep(method: str, dataset: Any, hpc: Any, quick: bool) -> tuple[list[Any], float, float]:
    """The candidates, the wall seconds and the CPU seconds of this process."""
    from adaptedge.trainer.methods.registry import MethodOptions, get_method

    options = MethodOptions(n_jobs=1, progress=False, quick=quick)
    started, cpu = time.perf_counter(), time.process_time()
    policies = list(get_method(method)(dataset, hpc, options))
    return policies, time.perf_counter() - started, time.process_time() - cpu


def _workers_cpu(client: Any) -> float:
    return float(sum(client.run(time.process_time).values()))


def _on_cluster(n_workers: int, method: str, dataset: Any, hpc: Any, quick: bool
                ) -> tuple[list[Any], dict[str, Any]]:
    from distributed import LocalCluster

    from adaptedge.trainer.parallel import use_cluster

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="adaptedge-dask-") as scratch, LocalCluster(
            n_workers=n_workers, processes=True, threads_per_worker=1, host="127.0.0.1",
            dashboard_address=None, local_directory=scratch) as cluster:
        start = time.perf_counter() - started
        with use_cluster(cluster.scheduler_address) as connected:
            assert connected is not None
            started = time.perf_counter()
            from adaptedge.trainer.methods.registry import METHOD_MODULES

            connected.client.run(__import__, METHOD_MODULES[method])
            warm = time.perf_counter() - started
            load, cpu = _load(), _workers_cpu(connected.client)
            policies, seconds, own_cpu = _sweep(method, dataset, hpc, quick)
            cpu = _workers_cpu(connected.client) - cpu + own_cpu
    return policies, {"workers": n_workers, "start_seconds": round(start, 3),
                      "warm_seconds": round(warm, 3), "sweep_seconds": round(seconds, 3),
                      "cpu_seconds": round(cpu, 3),
                      "load_average_1min_before": load, "load_average_1min_after": _load()}


def _signature(policies: list[Any]) -> list[tuple[str, Any]]:
    return sorted((p.name, p.validation) for p in policies)


def run(dataset_name: str, method: str, quick: bool) -> dict[str, Any]:
    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.hpc import fit_hpc

    dataset = load_dataset(dataset_name)
    hpc = fit_hpc(dataset)
    load = _load()
    local, seconds, cpu = _sweep(method, dataset, hpc, quick)
    report: dict[str, Any] = {
        "dataset": dataset_name, "method": method, "quick": quick, "cpu_count": os.cpu_count(),
        "hpc_validation_accuracy": hpc.val_accuracy, "n_candidates": len(local),
        "local_jobs_1": {"sweep_seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3),
                         "load_average_1min_before": load,
                         "load_average_1min_after": _load(),
                         "best_within_1pct": _best(local, hpc.val_accuracy)},
        "cluster": [],
    }
    for n_workers in (1, 2):
        policies, timing = _on_cluster(n_workers, method, dataset, hpc, quick)
        timing["best_within_1pct"] = _best(policies, hpc.val_accuracy)
        timing["same_candidates"] = _signature(policies) == _signature(local)
        timing["ratio_to_local_jobs_1"] = round(timing["sweep_seconds"] / seconds, 3)
        report["cluster"].append(timing)
        print(f"{n_workers} worker(s): {timing['sweep_seconds']:.1f} s "
              f"(local {seconds:.1f} s)", file=sys.stderr)
    two = report["cluster"][-1]
    report["acceptance"] = {
        "same_best_within_1pct": two["best_within_1pct"] == report["local_jobs_1"][
            "best_within_1pct"],
        "two_workers_ratio": two["ratio_to_local_jobs_1"],
        "two_workers_at_most_0.65x": two["ratio_to_local_jobs_1"] <= 0.65,
    }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="heart and the method's quick sweep (a smoke run)")
    parser.add_argument("--dataset", help="built-in dataset (default letter-binary; heart "
                                          "with --quick)")
    parser.add_argument("--method", default="adapt-gbrt")
    parser.add_argument("--out", type=Path, help="also write the JSON to this file")
    args = parser.parse_args(argv)
    dataset = args.dataset or ("heart" if args.quick else "letter-binary")
    report = run(dataset, args.method, args.quick)
    text = json.dumps(report, indent=1)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
