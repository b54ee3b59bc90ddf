"""Load shedding under overload: a worker offered 5x what it can serve.

Measures the worker's capacity (closed loop, 50 in flight), then has device processes offer
``--factor`` times that rate, open loop, for ``--seconds``, each request with a
``--deadline-ms`` deadline. Every request must get exactly one reply (an answer or an explicit
``overloaded``/``expired`` shed), and answered requests must meet their deadline. Prints one
JSON object: ``requests``, ``answered``, ``shed``, ``lost`` (must be 0), ``duplicated`` (must
be 0), ``answered_p99_ms`` (must be <= ``deadline_ms``), ``capacity_rps``, ``offered_rps``.

    .venv/bin/python -m benchmarks.overload [--factor 5] [--seconds 3] [--deadline-ms 250]

``--backlog``: a deep backlog instead (issue 31): 3,000 requests/s for 50 s, each with a 120 s
deadline, against the same heavy HPC, through a private mosquitto whose queue is unbounded
(``--broker-queue``), so the worker falls far behind and what waits sits in the broker. Every
request must still get exactly one reply, and the worker must never lose its own connection
(counted from its log and from the broker's). Prints ``sent``, ``answered``, ``shed``,
``lost``, ``duplicated``, ``worker_disconnects`` and ``pass``.

    .venv/bin/python -m benchmarks.overload --backlog [--rate 3000] [--seconds 50]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

from adaptedge.cloud.transport.client import RequestClient
from adaptedge.protocol import ErrorReply, InferenceRequest, encode, pack_features
from benchmarks.cloud import Load, build_bundle, service, stop

DRAIN_LIMIT_S = 30.0
"""After the offered load stops, how long devices wait for the last replies (bounded; in
``--backlog`` mode the deadline plus this)."""
WORKER_ID = "bench-32"
"""The worker's MQTT client id (``benchmarks.cloud.service`` with ``--max-batch 32``)."""


def run_device(url: str, name: str, bundle_id: str, rate: float, seconds: float,
               deadline_ms: float, features: int, out: Path, drain_s: float) -> None:
    """One device: publish at ``rate`` for ``seconds`` (open loop), then collect replies."""
    client = RequestClient(url, name, client_id=f"overload-{name}-{os.getpid()}")
    client.connect()
    feats, mask = pack_features(np.random.default_rng(7).normal(size=features),
                                np.ones(features))
    sent_at: dict[int, float] = {}
    sent_wall: dict[int, float] = {}
    latency_ms: dict[int, float] = {}
    worker_ms: list[float] = []
    codes: Counter[str] = Counter()

    def on_reply(reply: object, at: float) -> None:
        rid = getattr(reply, "request_id", None)
        if rid in sent_at and rid not in latency_ms:
            latency_ms[rid] = (at - sent_at[rid]) * 1000.0
            codes[reply.code if isinstance(reply, ErrorReply) else "answer"] += 1
            if not isinstance(reply, ErrorReply):  # when the worker had the answer
                worker_ms.append((reply.server_time - sent_wall[rid]) * 1000.0)  # type: ignore[attr-defined]

    client.on_reply = on_reply
    total = int(rate * seconds)
    start = time.perf_counter()
    while len(sent_at) < total and time.perf_counter() - start < seconds + 5.0:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while len(sent_at) < due:
            rid = len(sent_at)
            sent_wall[rid] = time.time()
            client.send(encode(InferenceRequest(rid, name, bundle_id, sent_wall[rid],
                                                deadline_ms, feats, mask)))
            sent_at[rid] = time.perf_counter()
        client.pump(0.0005)
    offered_s = time.perf_counter() - start
    client.pump(drain_s, lambda: len(latency_ms) >= len(sent_at))
    client.pump(0.5)  # anything duplicated arrives now
    replies_per_id = Counter({rid: len(rs) for rid, rs in client.replies.items()})
    answered = [latency_ms[r] for r in latency_ms
                if not isinstance(client.replies[r][0][1], ErrorReply)]
    out.write_text(json.dumps({
        "requests": len(sent_at), "offered_s": offered_s, "codes": dict(codes),
        "lost": sum(1 for r in sent_at if r not in client.replies),
        "duplicated": sum(1 for n in replies_per_id.values() if n > 1),
        "answered_ms": answered, "worker_ms": worker_ms}))
    client.close()


def measure_capacity(url: str, bundle: Path, manifest: object, features: int, n: int) -> float:
    load = Load(url, "adaptedge", manifest, features)  # type: ignore[arg-type]
    load.throughput(min(n, 1000), 50)  # warm up
    rps = float(np.median([load.throughput(n, 50) for _ in range(3)]))
    load.client.close()
    return rps


def overload(url: str, bundle_id: str, rate: float, args: argparse.Namespace,
             work: Path) -> list[dict[str, object]]:
    procs, outs = [], []
    drain_s = DRAIN_LIMIT_S + (args.deadline_ms / 1000.0 if args.backlog else 0.0)
    for k in range(args.devices):
        out = work / f"device-{k}.json"
        cmd = [sys.executable, "-m", "benchmarks.overload", "--device", url, f"overload-dev{k}",
               bundle_id, str(rate / args.devices), str(args.seconds), str(args.deadline_ms),
               str(args.features), str(out), str(drain_s)]
        procs.append(subprocess.Popen(cmd, cwd=REPO))
        outs.append(out)
    for proc in procs:
        proc.wait(timeout=args.seconds + drain_s + 60)
    return [json.loads(out.read_text()) for out in outs]


def worker_disconnects(service_log: Path, broker_log: str) -> dict[str, int]:
    """How often the worker lost its connection: its own reconnections, and the broker's
    notices of the worker's connection ending other than by its final clean DISCONNECT."""
    worker = service_log.read_text().count("lost the broker connection")
    broker = sum(1 for line in broker_log.splitlines() if WORKER_ID in line and any(
        s in line for s in ("exceeded timeout", "closed its connection", "socket error",
                            "protocol error", "already connected")))
    return {"worker_log": worker, "broker_log": broker}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", nargs=9, help=argparse.SUPPRESS)
    ap.add_argument("--backlog", action="store_true", help="a deep backlog: --rate for "
                    "--seconds at a long deadline (defaults 3000/s, 50 s, 120,000 ms)")
    ap.add_argument("--rate", type=float, default=3000.0,
                    help="offered requests/s in --backlog mode (all devices together)")
    ap.add_argument("--broker-queue", type=int, default=None, help="mosquitto "
                    "max_queued_messages per client (default 100000; 0, unbounded, "
                    "with --backlog)")
    ap.add_argument("--factor", type=float, default=5.0, help="offered load / capacity")
    ap.add_argument("--seconds", type=float, default=None,
                    help="how long the load is offered (default 3; 50 with --backlog)")
    ap.add_argument("--deadline-ms", type=float, default=None,
                    help="request deadline (default 250; 120000 with --backlog)")
    ap.add_argument("--devices", type=int, default=4, help="device processes offering load")
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=2048, help="HPC MLP width")
    ap.add_argument("--depth", type=int, default=4, help="HPC MLP hidden layers (a heavy HPC: "
                    "capacity bound by compute, which shedding saves)")
    ap.add_argument("--capacity-requests", type=int, default=2000)
    return ap


def _run(args: argparse.Namespace, work: Path) -> tuple[list[dict[str, object]], float,
                                                        dict[str, int]]:
    """Measure the worker's capacity, offer the load; (per-device results, capacity, worker
    disconnects by source)."""
    from adaptedge.simulator.brokers import MosquittoBroker

    manifest = build_bundle(work / "bundle", args.features, hidden=args.hidden,
                            depth=args.depth)
    with MosquittoBroker(max_queued_messages=args.broker_queue) as broker:
        svc = service(broker.url, work / "bundle", 32, work / "service.log")
        try:
            capacity = measure_capacity(broker.url, work / "bundle", manifest, args.features,
                                        args.capacity_requests)
            rate = args.rate if args.backlog else args.factor * capacity
            results = overload(broker.url, manifest.bundle_id, rate, args, work)
        finally:
            stop(svc)
        disconnects = worker_disconnects(work / "service.log", broker.log())
    return results, capacity, disconnects


def _report(args: argparse.Namespace, results: list[dict[str, object]], capacity: float,
            disconnects: dict[str, int], started: float) -> dict[str, object]:
    """The JSON record of one run, with its pass verdict."""
    codes: Counter[str] = Counter()
    for r in results:
        codes.update(r["codes"])  # type: ignore[call-overload]
    answered_ms = [v for r in results for v in r["answered_ms"]]  # type: ignore[attr-defined]
    worker_ms = [v for r in results for v in r["worker_ms"]]  # type: ignore[attr-defined]
    requests = sum(int(r["requests"]) for r in results)  # type: ignore[call-overload]
    offered_s = max(float(r["offered_s"]) for r in results)  # type: ignore[arg-type]
    result: dict[str, object] = {
        "requests": requests,
        "sent": requests,
        "answered": codes["answer"],
        "shed": codes["overloaded"] + codes["expired"],
        "shed_overloaded": codes["overloaded"],
        "shed_expired": codes["expired"],
        "other_errors": {k: v for k, v in codes.items()
                         if k not in ("answer", "overloaded", "expired")},
        "lost": sum(int(r["lost"]) for r in results),  # type: ignore[call-overload]
        "duplicated": sum(int(r["duplicated"]) for r in results),  # type: ignore[call-overload]
        "worker_disconnects": sum(disconnects.values()),
        "worker_disconnects_by_source": disconnects,
        "answered_p50_ms": float(np.percentile(answered_ms, 50)) if answered_ms else None,
        "answered_p99_ms": float(np.percentile(answered_ms, 99)) if answered_ms else None,
        "answered_at_worker_p99_ms": float(np.percentile(worker_ms, 99)) if worker_ms else None,
        "deadline_ms": args.deadline_ms,
        "capacity_rps": capacity,
        "offered_rps": requests / offered_s,
        "offered_over_capacity": requests / offered_s / capacity,
        "mode": "backlog" if args.backlog else "overload",
        "factor_asked": None if args.backlog else args.factor,
        "rate_asked": args.rate if args.backlog else None,
        "broker_max_queued_messages": args.broker_queue,
        "seconds": args.seconds,
        "devices": args.devices,
        "worker": "adaptedge cloud serve --max-batch 32 (default shedding: queue bound = half "
                  "the deadline)",
        "hpc": f"MLP {args.features}-{args.hidden}x{args.depth}-4 (onnxruntime, 1 thread)",
        "load_average_1m": os.getloadavg()[0],
        "wall_s": time.monotonic() - started,
    }
    result["pass"] = (result["lost"] == 0 and result["duplicated"] == 0
                      and result["worker_disconnects"] == 0
                      and result["answered_p99_ms"] is not None
                      and result["answered_p99_ms"] <= args.deadline_ms)
    return result


def main() -> None:
    args = _parser().parse_args()
    if args.device:
        url, name, bundle_id, rate, seconds, deadline, features, out, drain = args.device
        run_device(url, name, bundle_id, float(rate), float(seconds), float(deadline),
                   int(features), Path(out), float(drain))
        return
    if args.seconds is None:
        args.seconds = 50.0 if args.backlog else 3.0
    if args.deadline_ms is None:
        args.deadline_ms = 120_000.0 if args.backlog else 250.0
    if args.broker_queue is None:
        args.broker_queue = 0 if args.backlog else 100_000

    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="adaptedge-bench-overload-"))
    results, capacity, disconnects = _run(args, work)
    print(json.dumps(_report(args, results, capacity, disconnects, started), indent=2))


if __name__ == "__main__":
    main()
