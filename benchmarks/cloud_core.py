"""The cloud service's core path in-process: CPU per request, no broker, no sockets.

``ServiceCore.on_message`` (route, decode, dedup, request age, batching) and ``flush`` (shedding,
one onnxruntime call per batch, replies encoded, stats) on the MLP bundle of
``benchmarks/cloud.py``, with a wire that drops what it is given. "More input waiting" is
answered yes for all but every ``batch``-th message, so batches have that size. Medians of
``--repeats`` runs per batch size, each of ``--requests`` requests with a 60 s deadline (nothing
is shed). Prints one JSON object. Run: ``python -m benchmarks.cloud_core [--batches 1,18]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from adaptedge.cloud.service.core import ServiceCore
from adaptedge.cloud.service.inference import HpcInference
from adaptedge.protocol import InferenceRequest, encode, pack_features
from benchmarks.cloud import SERVICE_PREFIX, build_bundle

N_FEATURES = 32
TOPIC = f"{SERVICE_PREFIX}/v1/bench-dev/req"


class _DroppingWire:
    """Counts what the core publishes and sends nothing."""

    def __init__(self) -> None:
        self.published = 0

    def publish(self, topic: str, payload: bytes, qos: int = 0) -> None:
        self.published += 1


def _core(bundle: Path, batch: int) -> ServiceCore:
    inference = HpcInference.load(bundle, prefix=SERVICE_PREFIX)
    core = ServiceCore(inference, "bench-worker", prefix=SERVICE_PREFIX, max_batch=max(batch, 32),
                       max_wait_ms=2.0, dedup_capacity=8192, max_queue_ms=None,
                       collect_telemetry=False, logger=logging.getLogger("benchmarks.cloud_core"))
    calls = 0

    def readable() -> bool:
        nonlocal calls
        calls += 1
        return calls % batch != 0

    core.bind(_DroppingWire(), readable)
    return core


def _payloads(bundle_id: str, first_id: int, n: int) -> list[bytes]:
    features, mask = pack_features(np.random.default_rng(1).normal(size=N_FEATURES),
                                   np.ones(N_FEATURES, bool))
    sent_at = time.time()
    return [encode(InferenceRequest(first_id + i, "bench-dev", bundle_id, sent_at, 60_000.0,
                                    features, mask)) for i in range(n)]


def _cpu_us_per_request(core: ServiceCore, payloads: list[bytes]) -> float:
    on_message, clock = core.on_message, time.monotonic
    gc.collect()
    start = time.thread_time()
    for payload in payloads:
        on_message(TOPIC, payload, clock())
    core.flush()
    return (time.thread_time() - start) / len(payloads) * 1e6


def main() -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", default="1,18", help="batch sizes (comma-separated)")
    ap.add_argument("--requests", type=int, default=18_000, help="requests per run")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="adaptedge-bench-core-"))
    manifest = build_bundle(work / "bundle", N_FEATURES)
    result: dict[str, object] = {"features": N_FEATURES, "requests_per_run": args.requests,
                                 "repeats": args.repeats}
    for batch in [int(b) for b in args.batches.split(",")]:
        core = _core(work / "bundle", batch)
        next_id, runs = 0, []
        for i in range(args.repeats + 1):  # the first run warms up
            payloads = _payloads(manifest.bundle_id, next_id, args.requests)
            next_id += args.requests
            cost = _cpu_us_per_request(core, payloads)
            if i:
                runs.append(cost)
        snap = core.stats.snapshot(core.inference.error_counts, 0, reset_window=False)
        if snap["replies"] != next_id or snap["errors"]:
            raise RuntimeError(f"batch {batch}: {snap['replies']:g} replies and "
                               f"{snap['errors']:g} errors for {next_id} requests")
        result[f"batch_{batch}_cpu_us_per_request"] = round(statistics.median(runs), 2)
        result[f"batch_{batch}_mean_batch"] = round(float(snap["batch_mean"]), 2)
    result["load_average_1min"] = round(os.getloadavg()[0], 2)
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
