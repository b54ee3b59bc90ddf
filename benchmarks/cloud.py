"""Cloud service speed against a raw paho echo, both over a mosquitto this script starts.

In one run: sequential round trip (p50/p99) and throughput with 50 requests in flight, for a
raw echo (request in, same bytes out, QoS 1 both ways) and for ``adaptedge cloud serve``
(decode, validate, one batched onnxruntime call, encode, reply); then the service's
throughput against ``--max-batch``. Each server is a separate process; the client drives
paho's loop in its own thread (no handoff). Rounds alternate echo/service and the medians are
reported, so load from other processes hits both alike. Prints one JSON object.

    .venv/bin/python benchmarks/cloud.py [--rounds 10] [--sequential 300] [--requests 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]

import itertools

from adaptedge.cloud.transport.client import RequestClient
from adaptedge.protocol import InferenceRequest, Manifest, encode, pack_features

ECHO_PREFIX = "echo"
SERVICE_PREFIX = "adaptedge"


# -- a bundle built here: a small MLP HPC ------------------------------------------------------
def build_bundle(out: Path, n_features: int, n_classes: int = 4, hidden: int = 64,
                 depth: int = 1, hpc: bytes | None = None, hpc_description: str = "") -> Manifest:
    """A one-node gate bundle whose HPC is an MLP (or the given ONNX bytes)."""
    from adaptedge.protocol import (
        Action,
        CostWeights,
        HpcRef,
        LinkSpec,
        ModelRef,
        OperatingPoint,
        PolicyGraph,
        PolicyNode,
        SensorSpec,
        write_bundle,
    )
    from adaptedge.trainer.export.models import mlp_to_onnx

    rng = np.random.default_rng(0)

    def model(layers: list[int]) -> bytes:
        weights = [(rng.normal(size=(a, b)).astype(np.float32), rng.normal(size=b).astype(np.float32))
                   for a, b in itertools.pairwise(layers)]
        return bytes(mlp_to_onnx(weights).SerializeToString())

    cols = tuple(range(n_features))
    gate = PolicyGraph(root="all", nodes={"all": PolicyNode(
        sensors=("s",), model=ModelRef("gate.onnx", cols),
        actions=(Action("stop"), Action("escalate")))})
    manifest = Manifest(
        schema_version=1, bundle_id="pending", classes=tuple(f"c{i}" for i in range(n_classes)),
        feature_names=tuple(f"f{i}" for i in cols), sensors=(SensorSpec("s", cols),),
        link=LinkSpec(), cost_weights=CostWeights(),
        hpc=HpcRef("hpc.onnx", ("s",), accuracy=0.9,
                   description=hpc_description or f"MLP {n_features}-{hidden}x{depth}"),
        policies={"gate": gate},
        operating_points=(OperatingPoint("gate", "gate", accuracy=0.8, cost=1.0),),
        default_operating_point="gate", files={}, metadata={"method": "benchmark"})
    hpc = hpc or model([n_features, *[hidden] * depth, n_classes])
    return write_bundle(out, manifest, {"hpc.onnx": hpc,
                                        "gate.onnx": model([n_features, n_classes])})


# -- servers -------------------------------------------------------------------------------
def echo_server(url: str) -> None:
    """Raw paho echo: every request's bytes back on the device's reply topic, QoS 1."""
    from adaptedge.cloud.transport.connection import connect, make_client, parse_broker_url

    client = make_client(f"echo-{os.getpid()}")
    connect(client, parse_broker_url(url))

    def on_message(c: Any, userdata: Any, message: Any) -> None:
        c.publish(message.topic[:-3] + "resp", message.payload, qos=1)

    client.on_message = on_message
    # The same shared-subscription routing the service gets from the broker.
    client.subscribe(f"$share/echo/{ECHO_PREFIX}/v1/+/req", qos=1)
    print("ready", flush=True)
    client.loop_forever()


def spawn(cmd: list[str], ready: str, log: Path) -> subprocess.Popen[bytes]:
    fh = log.open("wb")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while ready not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{cmd[:4]} did not start: {log.read_text()[-1000:]}")
        time.sleep(0.05)
    return proc


def service(url: str, bundle: Path, max_batch: int, log: Path) -> subprocess.Popen[bytes]:
    return spawn([sys.executable, "-m", "adaptedge.cli.main", "cloud", "serve", "--bundle",
                  str(bundle), "--broker", url, "--max-batch", str(max_batch),
                  "--client-id", f"bench-{max_batch}", "--stats-every", "3600",
                  "--log-level", "INFO"], "ready", log)


def logged_batch_mean(log: Path) -> float | None:
    """Mean batch size from the service's final stats line (logged when it stops)."""
    found = re.findall(r"batch_mean=([0-9.]+)", log.read_text())
    return float(found[-1]) if found else None


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- the client ----------------------------------------------------------------------------
class Load:
    def __init__(self, url: str, prefix: str, manifest: Manifest, n_features: int) -> None:
        self.client = RequestClient(url, "bench-dev", prefix=prefix,
                                    client_id=f"bench-{prefix}-{os.getpid()}")
        self.client.connect()
        rng = np.random.default_rng(1)
        self.feats, self.mask = pack_features(rng.normal(size=n_features), np.ones(n_features))
        self.bundle_id = manifest.bundle_id
        self.next_id = 0

    def payload(self) -> tuple[int, bytes]:
        rid, self.next_id = self.next_id, self.next_id + 1
        return rid, encode(InferenceRequest(rid, "bench-dev", self.bundle_id, time.time(), 1000.0,
                                            self.feats, self.mask))

    def sequential(self, n: int) -> list[float]:
        client, rtts = self.client, []
        for _ in range(n):
            rid, data = self.payload()
            start = time.perf_counter()
            client.send(data)
            if not client.pump(5.0, lambda rid=rid: rid in client.replies):  # type: ignore[misc]
                raise RuntimeError(f"no reply to request {rid} within 5 s")
            rtts.append(client.replies.pop(rid)[0][0] - start)
        return rtts

    def throughput(self, n: int, in_flight: int) -> float:
        client = self.client
        done = 0
        sent = 0

        def on_reply(msg: object, at: float) -> None:
            nonlocal done, sent
            done += 1
            if sent < n:
                sent += 1
                client.send(self.payload()[1])

        client.on_reply = on_reply
        start = time.perf_counter()
        for _ in range(min(in_flight, n)):
            sent += 1
            client.send(self.payload()[1])
        ok = client.pump(120.0, lambda: done >= n)
        elapsed = time.perf_counter() - start
        client.on_reply = None
        client.replies.clear()
        if not ok:
            raise RuntimeError(f"only {done} of {n} replies within 120 s")
        return n / elapsed


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile_us(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1e6, q))


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--echo-server", metavar="URL", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--sequential", type=int, default=300, help="round trips per round")
    ap.add_argument("--requests", type=int, default=3000, help="requests per throughput run")
    ap.add_argument("--in-flight", type=int, default=50)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64, help="HPC hidden units (heavier = more "
                    "to gain from batching)")
    ap.add_argument("--batch-sizes", default="1,4,16,64")
    return ap


Series = dict[str, list[float]]


def _alternating_rounds(loads: dict[str, Load], pids: dict[str, int], args: argparse.Namespace
                        ) -> tuple[Series, Series, Series, dict[str, float]]:
    """Echo and service measured round by round: (round trips, per-round p50s, throughputs,
    server CPU seconds)."""
    seq: Series = {"echo": [], "service": []}
    seq_rounds: Series = {"echo": [], "service": []}
    rps: Series = {"echo": [], "service": []}
    cpu = {"echo": 0.0, "service": 0.0}
    for load in loads.values():  # warm up: connections, caches, onnxruntime
        load.sequential(200)
        load.throughput(1000, args.in_flight)
    for r in range(args.rounds):
        # Alternate which goes first, so drifting load from other processes hits both alike.
        for name, load in sorted(loads.items(), reverse=bool(r % 2)):
            rtts = load.sequential(args.sequential)
            seq[name] += rtts
            seq_rounds[name].append(percentile_us(rtts, 50))
            before = cpu_seconds(pids[name])
            rps[name].append(load.throughput(args.requests, args.in_flight))
            cpu[name] += cpu_seconds(pids[name]) - before
    return seq, seq_rounds, rps, cpu


def _by_max_batch(url: str, work: Path, manifest: Any, args: argparse.Namespace
                  ) -> tuple[dict[int, float], dict[int, float | None]]:
    """The service's throughput and logged mean batch at each ``--max-batch``."""
    by_batch: dict[int, float] = {}
    batch_means: dict[int, float | None] = {}
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        svc = service(url, work / "bundle", batch, work / f"service-{batch}.log")
        try:
            load = Load(url, SERVICE_PREFIX, manifest, args.features)
            load.throughput(1000, args.in_flight)
            by_batch[batch] = statistics.median(
                load.throughput(args.requests // 2, args.in_flight)
                for _ in range(max(3, args.rounds // 3)))
            load.client.close()
        finally:
            stop(svc)
        batch_means[batch] = logged_batch_mean(work / f"service-{batch}.log")
    return by_batch, batch_means


def main() -> None:
    args = _parser().parse_args()
    if args.echo_server:
        echo_server(args.echo_server)
        return

    from adaptedge.simulator.brokers import MosquittoBroker

    work = Path(tempfile.mkdtemp(prefix="adaptedge-bench-cloud-"))
    manifest = build_bundle(work / "bundle", args.features, hidden=args.hidden)
    with MosquittoBroker() as broker:
        echo = spawn([sys.executable, __file__, "--echo-server", broker.url], "ready",
                     work / "echo.log")
        svc = service(broker.url, work / "bundle", 32, work / "service.log")
        try:
            loads = {"echo": Load(broker.url, ECHO_PREFIX, manifest, args.features),
                     "service": Load(broker.url, SERVICE_PREFIX, manifest, args.features)}
            seq, seq_rounds, rps, cpu = _alternating_rounds(
                loads, {"echo": echo.pid, "service": svc.pid}, args)
            loads["service"].client.close()
        finally:
            stop(svc)
        try:
            by_batch, batch_means = _by_max_batch(broker.url, work, manifest, args)
        finally:
            loads["echo"].client.close()
            stop(echo)
    print(json.dumps(_result(args, seq, seq_rounds, rps, cpu, by_batch, batch_means), indent=2))


def _result(args: argparse.Namespace, seq: Series, seq_rounds: Series, rps: Series,
            cpu: dict[str, float], by_batch: dict[int, float],
            batch_means: dict[int, float | None]) -> dict[str, Any]:
    """The JSON record, with the pass verdicts."""
    result = {
        "echo_rtt_p50_us": percentile_us(seq["echo"], 50),
        "echo_rtt_p99_us": percentile_us(seq["echo"], 99),
        "service_rtt_p50_us": percentile_us(seq["service"], 50),
        "service_rtt_p99_us": percentile_us(seq["service"], 99),
        "echo_rps": statistics.median(rps["echo"]),
        "service_rps": statistics.median(rps["service"]),
        "rtt_p50_ratio": percentile_us(seq["service"], 50) / percentile_us(seq["echo"], 50),
        "rtt_p50_ratio_median_of_rounds": statistics.median(
            s / e for s, e in zip(seq_rounds["service"], seq_rounds["echo"], strict=True)),
        "rps_ratio": statistics.median(rps["service"]) / statistics.median(rps["echo"]),
        "echo_server_cpu_us_per_request": cpu["echo"] / (args.rounds * args.requests) * 1e6,
        "service_server_cpu_us_per_request": cpu["service"] / (args.rounds * args.requests) * 1e6,
        "load_average_1m": os.getloadavg()[0],
        "service_rps_by_max_batch": {str(k): v for k, v in by_batch.items()},
        "service_mean_batch_by_max_batch": {str(k): v for k, v in batch_means.items()},
        "rounds": args.rounds,
        "sequential_per_round": args.sequential,
        "requests_per_round": args.requests,
        "in_flight": args.in_flight,
        "features": args.features,
        "hpc": f"MLP {args.features}-{args.hidden}-4 (onnxruntime, 1 thread)",
        "qos": 1,
        "mqtt": "3.1.1",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    result["pass_rtt"] = result["rtt_p50_ratio"] <= 1.5
    result["pass_rps"] = result["rps_ratio"] >= 0.7
    return result


if __name__ == "__main__":
    main()
