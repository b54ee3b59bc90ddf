"""Wire codec speed: encode+decode of a 50-feature request and its reply vs plain msgpack.

Prints one JSON object. All are measured in the same run, interleaved (medians of REPEATS), so
the ratios are meaningful on a noisy machine. ``msgpack_roundtrip_us``: msgpack
``unpackb(packb(...))`` of the request's feature bytes alone; ``msgpack_message_roundtrip_us``:
of the request's fields as a plain list (the same message, no types, no validation).
``*_cpu`` fields: the same two round trips timed in this thread's CPU time, which other
processes on a shared machine disturb far less than wall time. Run: ``python -m benchmarks.protocol``.
"""

from __future__ import annotations

# This file is named like the package it measures: keep its folder off the import path.
import json
import os
import statistics
import time
from collections.abc import Callable

import msgpack
import msgspec
import numpy as np

from adaptedge.protocol import InferenceReply, InferenceRequest, decode, encode, pack_features
from adaptedge.protocol.messages import TYPE_REQUEST, kind

N_FEATURES = 50
LOOPS = 2000
REPEATS = 25


def _per_call_us(fn: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> float:
    start = clock()
    for _ in range(LOOPS):
        fn()
    return (clock() - start) / LOOPS * 1e6


def main() -> dict[str, float]:
    rng = np.random.default_rng(0)
    values = rng.normal(size=N_FEATURES).astype(np.float32)
    features, mask = pack_features(values, np.ones(N_FEATURES, bool))
    request = InferenceRequest(42, "device-0001", "5e1b2aadb5d164f33bed8c5a", time.time(), 250.0,
                               features, mask, 1, 0.8)
    reply = InferenceReply(42, "device-0001", request.bundle_id, 1,
                           np.array([0.2, 0.8], "<f4").tobytes(), "hpc", time.time(), 0.3)
    raw = values.astype("<f4").tobytes()

    def request_rt() -> object:
        return decode(encode(request))

    def reply_rt() -> object:
        return decode(encode(reply))

    def plain_rt() -> object:
        return msgpack.unpackb(msgpack.packb(raw))

    fields = [kind(TYPE_REQUEST), *msgspec.structs.astuple(request)]

    def plain_message_rt() -> object:
        return msgpack.unpackb(msgpack.packb(fields))

    samples: dict[str, list[float]] = {"request": [], "reply": [], "plain": [], "message": [],
                                       "request_cpu": [], "plain_cpu": []}
    for fn in (request_rt, reply_rt, plain_rt, plain_message_rt):
        _per_call_us(fn)  # warm up
    for _ in range(REPEATS):
        samples["request"].append(_per_call_us(request_rt))
        samples["reply"].append(_per_call_us(reply_rt))
        samples["plain"].append(_per_call_us(plain_rt))
        samples["message"].append(_per_call_us(plain_message_rt))
        samples["request_cpu"].append(_per_call_us(request_rt, time.thread_time))
        samples["plain_cpu"].append(_per_call_us(plain_rt, time.thread_time))
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "n_features": N_FEATURES,
        "request_bytes": len(encode(request)),
        "request_roundtrip_us": round(med["request"], 3),
        "reply_roundtrip_us": round(med["reply"], 3),
        "msgpack_roundtrip_us": round(med["plain"], 3),
        "request_vs_msgpack": round(med["request"] / med["plain"], 2),
        "reply_vs_msgpack": round(med["reply"] / med["plain"], 2),
        "msgpack_message_roundtrip_us": round(med["message"], 3),
        "request_vs_msgpack_message": round(med["request"] / med["message"], 2),
        "request_roundtrip_cpu_us": round(med["request_cpu"], 3),
        "msgpack_roundtrip_cpu_us": round(med["plain_cpu"], 3),
        "request_vs_msgpack_cpu": round(med["request_cpu"] / med["plain_cpu"], 2),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


if __name__ == "__main__":
    print(json.dumps(main()))
