"""The C export on microcontrollers: footprint, instructions per decision and parity, per
policy and target, and the same decisions' time in the Python runtime and onnxruntime.

For the quick letter-binary ADAPT-GBRT and DAG bundles (trained here unless ``--bundles DIR``
holds ``adapt-gbrt/`` and ``dag/`` from an earlier run) the default operating point is exported
with ``adaptedge export c`` and run on the test split: on the host (gcc, through a shared
object), and under QEMU with ``-icount shift=0`` on a Cortex-M4F (``mps2-an386``) and a
Cortex-M0+ with soft float (``microbit``). Each record: ``policy``, ``target``,
``flash_bytes`` (text + data of the linked image: the policy, the libm/libgcc routines it
needs, the replay harness and start-up; host: the policy's object), ``library_flash_bytes``
(the policy's object alone), ``ram_bytes`` (static + measured stack; host: static only),
``instructions_per_decision`` (mean over the rows; SysTick calibrated against a loop of known
length), ``rows`` and ``mismatches`` against ``EdgeRuntime.predict_row`` (label, escalation,
sensors read in order, nodes, escalation request, cost). ``timings`` gives per policy the
microseconds per decision of ``EdgeRuntime.predict_row``, of the onnxruntime calls alone on the
same visited nodes, and of the C library on the host. The numbers depend on the machine's load
(``load_average`` is printed with them).

Run: ``python -m benchmarks.mcu [--rows N] [--bundles DIR] [--out DIR]``; prints one JSON
object with a list ``results`` (and writes ``<out>/mcu.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

METHODS = ("adapt-gbrt", "dag")


def _bundle(method: str, bundles: Path) -> Path:
    path = bundles / method
    if not (path / "manifest.json").exists():
        from adaptedge.trainer.api import train_bundle

        train_bundle("letter-binary", method, path, quick=True, progress=False)
    return path


def _host_record(policy: str, lib_dir: Path, work: Path, bundle: Path, point: str,
                 X: npt.NDArray[np.float32], dims: tuple[int, int, int]) -> tuple[dict[str, Any],
                                                                                  float]:
    from tests.support.c_policy import CFLAGS, build_host, compile_c, mismatches, run_host

    lib = build_host(lib_dir, work)
    obj = work / "host.o"
    compile_c(["gcc", *CFLAGS, "-c", str(lib_dir / "adaptedge_policy.c"), "-o", str(obj)])
    text, data, bss = _size("size", obj)
    t0 = time.perf_counter()
    records = run_host(lib, X, dims[0], dims[2], False)
    seconds = time.perf_counter() - t0
    bad = mismatches(bundle, point, X, records, False)
    return ({"policy": policy, "target": "host", "flash_bytes": text + data,
             "library_flash_bytes": text + data, "ram_bytes": data + bss,
             "instructions_per_decision": None, "rows": len(X), "mismatches": len(bad)},
            seconds / len(X) * 1e6)


def _size(tool: str, path: Path) -> tuple[int, int, int]:
    line = subprocess.run([tool, str(path)], capture_output=True, text=True,
                          check=True).stdout.splitlines()[1].split()
    return int(line[0]), int(line[1]), int(line[2])


def _mcu_record(policy: str, target: str, lib_dir: Path, work: Path, bundle: Path, point: str,
                X: npt.NDArray[np.float32], dims: tuple[int, int, int]) -> dict[str, Any]:
    from tests.support.c_policy import mismatches
    from tests.support.qemu_policy import build_firmware, run_qemu

    fw = build_firmware(lib_dir, target, work / target)
    run = run_qemu(fw, X, dims[0], dims[1], dims[2], False, work / f"run-{target}")
    bad = mismatches(bundle, point, X, run.records, False)
    return {"policy": policy, "target": target, "flash_bytes": fw.flash_bytes,
            "library_flash_bytes": fw.library_flash_bytes,
            "ram_bytes": fw.static_ram_bytes + run.stack_bytes,
            "static_ram_bytes": fw.static_ram_bytes, "stack_bytes": run.stack_bytes,
            "instructions_per_decision": round(run.instructions_per_decision, 1),
            "rows": len(X), "mismatches": len(bad)}


def python_timings(bundle: Path, point: str, X: npt.NDArray[np.float32]) -> dict[str, float]:
    """Microseconds per decision: ``EdgeRuntime.predict_row``, and onnxruntime alone on the
    nodes each decision visited (pre-bound sessions, as the runtime calls them)."""
    from adaptedge.edge import EdgeRuntime
    from adaptedge.edge.policy import ModelStore, compile_policy
    from adaptedge.protocol.bundle import read_manifest

    manifest = read_manifest(bundle)
    with EdgeRuntime.load(bundle, operating_point=point) as rt:
        t0 = time.perf_counter()
        visited = [rt.predict_row(row).nodes for row in X]
        runtime_s = time.perf_counter() - t0
    name = manifest.operating_point(point).policy
    compiled = compile_policy(manifest, name, manifest.policies[name], ModelStore(manifest,
                                                                                 bundle))
    onnx_s = 0.0
    for row, nodes in zip(X, visited, strict=True):
        for node_id in nodes:
            node = compiled.nodes[node_id]
            node.session.x_row[...] = row[node.inputs]
            t0 = time.perf_counter()
            node.session.run()
            onnx_s += time.perf_counter() - t0
    return {"python_runtime_us_per_decision": round(runtime_s / len(X) * 1e6, 2),
            "onnxruntime_us_per_decision": round(onnx_s / len(X) * 1e6, 2)}


def bench_policy(method: str, bundles: Path, X: npt.NDArray[np.float32], work: Path,
                 targets: tuple[str, ...]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from adaptedge.protocol.bundle import read_manifest
    from adaptedge.trainer.export.c import export_c

    bundle = _bundle(method, bundles)
    manifest = read_manifest(bundle)
    point = manifest.default_operating_point
    graph = manifest.policies[manifest.operating_point(point).policy]
    policy = f"letter-binary quick {method} ({point}, {len(graph.nodes)} nodes)"
    lib_dir = work / method / "lib"
    export_c(bundle, lib_dir, point)
    dims = (len(manifest.sensors), len(graph.nodes), len(manifest.classes))
    host, host_us = _host_record(policy, lib_dir, work / method, bundle, point, X, dims)
    results = [host] + [_mcu_record(policy, t, lib_dir, work / method, bundle, point, X, dims)
                        for t in targets]
    timings = {"policy": policy, **python_timings(bundle, point, X),
               "host_c_us_per_decision": round(host_us, 3)}
    return results, timings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="first N test rows (default all)")
    parser.add_argument("--bundles", type=Path, default=None,
                        help="directory holding (or to keep) adapt-gbrt/ and dag/ bundles")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/mcu"))
    args = parser.parse_args(argv)
    from adaptedge.trainer.data.datasets import load_dataset
    from tests.support.qemu_policy import TARGETS, toolchain_missing

    X = np.asarray(load_dataset("letter-binary").X_test[:args.rows], dtype=np.float32)
    skipped = toolchain_missing()
    targets = () if skipped else tuple(TARGETS)
    results: list[dict[str, Any]] = []
    timings: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        bundles = args.bundles or Path(tmp) / "bundles"
        for method in METHODS:
            rows, timing = bench_policy(method, bundles, X, Path(tmp) / "work", targets)
            results += rows
            timings.append(timing)
    report = {"benchmark": "mcu", "dataset": "letter-binary", "split": "test",
              "results": results, "timings": timings, "qemu_skipped": skipped,
              "load_average": [round(v, 2) for v in os.getloadavg()]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "mcu.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
