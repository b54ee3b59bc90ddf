"""CSTC/CSCC default sweeps with one BLAS thread (as ``adaptedge train`` runs them) against
OpenBLAS's default threads, in one process: CPU seconds and the validation-chosen point.

The node solves multiply [n, d] by [d, classes]; on a shared 2-core machine a second OpenBLAS
thread spins. ``after`` is ``trainer.methods.cstc.method.sweep`` (one thread), ``before`` its
unthrottled body ``_sweep``. The chosen point is the operating-point rule on validation
(``confidently_near``: Wilson lower bound >= the HPC's - 0.01); nothing here reads test.

Run: ``python -m benchmarks.cstc_threads [--datasets gas] [--methods cstc,cscc] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from typing import Any


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def compare(name: str, method: str, seed: int) -> list[dict[str, Any]]:
    """``after`` then ``before`` for one data set and method (cstc or cscc)."""
    from adaptedge.protocol.operating_points import confidently_near
    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.cstc import method as cstc
    from adaptedge.trainer.methods.cstc.objective import Variant
    from adaptedge.trainer.methods.cstc.structure import cascade, full_tree
    from adaptedge.trainer.methods.registry import MethodOptions

    d = load_dataset(name, seed=seed)
    hpc = fit_hpc(d, seed=seed)
    shape = full_tree(3) if method == "cstc" else cascade(4)
    variant: Variant = "cstc" if method == "cstc" else "cscc"
    opts = cstc._options(MethodOptions(seed=seed), method)
    rows = []
    for label in ("after", "before"):
        load, cpu, wall = os.getloadavg()[0], _cpu(), time.perf_counter()
        graphs = (cstc.sweep(d, hpc, MethodOptions(seed=seed), shape, variant, method, opts)
                  if label == "after" else cstc._sweep(d, hpc, shape, variant, method, opts))
        cpu, wall = _cpu() - cpu, time.perf_counter() - wall
        i = confidently_near([g.validation for g in graphs], hpc.val_accuracy, 0.01,
                             len(d.y_val), fallback=False)
        chosen = None if i is None else {"name": graphs[i].name,
                                         "val_accuracy": graphs[i].validation.accuracy,
                                         "val_cost": graphs[i].validation.cost}
        rows.append({"dataset": name, "method": method, "blas": label, "cpu_seconds": cpu,
                     "wall_seconds": wall, "load_average_1min": [load, os.getloadavg()[0]],
                     "chosen_on_validation": chosen})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--datasets", default="gas")
    parser.add_argument("--methods", default="cstc,cscc")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name in args.datasets.split(","):
        for method in args.methods.split(","):
            if method not in ("cstc", "cscc"):
                parser.error(f"method must be cstc or cscc, got {method!r}")
            compare(name, method, args.seed)


if __name__ == "__main__":
    main()
