"""Scale-out: 1 and 2 cloud workers on mosquitto ``$share`` and on a NATS queue group, and the
NATS node-failure run.

Throughput (closed loop, ``--in-flight`` requests outstanding) and sequential round trips
(p50/p99) from one MQTT load generator, for 1 then 2 ``adaptedge cloud serve`` worker
processes, alternating in each round (the second worker is started and stopped), so drifting
load from other processes hits both alike. Paths:

- ``mosquitto``: one mosquitto, workers in ``$share/adaptedge/...``, QoS 1;
- ``nats``: a three-node NATS cluster (``cloud nats-config`` accounts), worker 1 on node 1,
  worker 2 on node 2, the load generator on node 3's MQTT listener (every message crosses a
  route), device QoS 0 (see ``edge/mqtt_uplink.py``).

The machine has 2 cores shared with the brokers, the load generator and other users, so the
workers run ``--max-batch 1`` on an HPC heavy enough that worker compute dominates (by default
one 256-wide layer applied 1,500 times, ~6 ms of CPU: the work of a deep MLP whose weights
stay in a core's cache, since a big MLP's weights stream from memory and two workers then
share its bandwidth; ``--hidden`` selects a plain MLP), and the CPU seconds per request of
the workers, the broker processes and the load generator are measured (``/proc``) and reported: ``cpu_bound_ceiling_rps`` = 2 cores / total CPU per request
is the most any number of workers could reach here, and ``cpu_share_of_machine`` how much
of the 2 cores the setup actually got while it ran. Linux shares CPU fairly between sessions
first (``kernel.sched_autogroup_enabled``), so on a machine other people load, processes of one
session share one slice whatever their number: each worker is started in a session of its
own (``start_new_session``), as separate hosts would each bring their own CPU; the brokers and
the load generator share this script's session. ``cpu_model_ratio_2_over_1`` is the 2-over-1
worker ratio those measured CPU costs allow on 2 idle cores (a worker is one thread; workers,
brokers and load generator share the cores): on 2 cores it stays below 2 by the brokers' and
the load generator's share. Then the node-failure run
(``simulator/nats_failover.py``) on a light bundle. Prints one JSON object.

    .venv/bin/python -m benchmarks.cluster [--rounds 3] [--requests 600] [--failure-runs 4]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]

from adaptedge.cloud.transport.client import RequestClient
from adaptedge.protocol import InferenceRequest, Manifest, encode, pack_features
from benchmarks.cloud import build_bundle, cpu_seconds, percentile_us, stop


class Generator:
    """One MQTT device connection: sequential round trips and a closed-loop throughput run."""

    def __init__(self, url: str, manifest: Manifest, qos: int, *, user: str | None = None,
                 password: str | None = None) -> None:
        self.qos = qos
        self.client = RequestClient(url, user or "bench-dev", username=user, password=password,
                                    client_id=user or f"bench-{os.getpid()}")
        self.client.connect(qos=qos)
        n = len(manifest.feature_names)
        self.feats, self.mask = pack_features(np.random.default_rng(1).normal(size=n),
                                              np.ones(n))
        self.bundle_id, self.device, self.next_id = manifest.bundle_id, self.client.device, 0

    def payload(self) -> tuple[int, bytes]:
        rid, self.next_id = self.next_id, self.next_id + 1
        return rid, encode(InferenceRequest(rid, self.device, self.bundle_id, time.time(),
                                            10_000.0, self.feats, self.mask))

    def sequential(self, n: int) -> list[float]:
        client, rtts = self.client, []
        for _ in range(n):
            rid, data = self.payload()
            start = time.perf_counter()
            client.send(data, qos=self.qos)
            if not client.pump(10.0, lambda rid=rid: rid in client.replies):  # type: ignore[misc]
                raise RuntimeError(f"no reply to request {rid} within 10 s")
            rtts.append(client.replies.pop(rid)[0][0] - start)
        return rtts

    def throughput(self, n: int, in_flight: int) -> float:
        client, counts = self.client, {"done": 0, "sent": 0}

        def on_reply(msg: object, at: float) -> None:
            counts["done"] += 1
            if counts["sent"] < n:
                counts["sent"] += 1
                client.send(self.payload()[1], qos=self.qos)

        client.on_reply = on_reply
        start = time.perf_counter()
        for _ in range(min(in_flight, n)):
            counts["sent"] += 1
            client.send(self.payload()[1], qos=self.qos)
        ok = client.pump(300.0, lambda: counts["done"] >= n)
        elapsed = time.perf_counter() - start
        client.on_reply = None
        client.replies.clear()
        if not ok:
            raise RuntimeError(f"only {counts['done']} of {n} replies within 300 s")
        return n / elapsed


def compute_bound_hpc(n_features: int, width: int, repeats: int, n_classes: int = 4) -> bytes:
    """An MLP that applies one ``width`` x ``width`` ReLU layer ``repeats`` times (one shared
    weight matrix): the work of a deep MLP with the weights of one layer, so it stays in a
    core's cache and two workers do not compete for memory bandwidth as a big MLP's do."""
    from adaptedge.protocol.onnx_contract import PROBA_OUTPUT
    from adaptedge.trainer.export import heads
    from adaptedge.trainer.export.graph import GraphBuilder
    from adaptedge.trainer.export.linear import linear

    rng = np.random.default_rng(0)
    b = GraphBuilder(n_features)
    linear(b, rng.normal(size=(n_features, width)) / np.sqrt(n_features), np.zeros(width),
           output="h", name="in_")
    shared = b.const("Ws", rng.normal(size=(width, width)) * np.sqrt(2.0 / width))
    source = "h"
    for k in range(repeats):
        b.add("MatMul", [source, shared], [f"m{k}"])
        b.add("Relu", [f"m{k}"], [f"r{k}"])
        source = f"r{k}"
    linear(b, rng.normal(size=(width, n_classes)) / np.sqrt(width), np.zeros(n_classes),
           source=source, output="logits", name="out_")
    b.output(PROBA_OUTPUT, heads.transform(b, "logits", PROBA_OUTPUT, "softmax", n_classes))
    return bytes(b.model().SerializeToString())


def worker(bundle: Path, url: str, name: str, log: Path, extra: list[str]) -> Any:
    """A worker process in a session of its own (see the module docstring: autogroup)."""
    cmd = [sys.executable, "-m", "adaptedge.cli.main", "cloud", "serve", "--bundle",
           str(bundle), "--broker", url, "--max-batch", "1", "--client-id", name,
           "--stats-every", "3600", *extra]
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + 60
    while "ready" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"worker {name} did not start: {log.read_text()[-1000:]}")
        time.sleep(0.05)
    return proc


def measure(start_worker: Callable[[int], Any], gen: Generator, broker_pids: list[int],
            args: argparse.Namespace) -> dict[str, Any]:
    """Alternating rounds of 1 and 2 workers; medians and CPU per request by component."""
    first = start_worker(0)
    rps: dict[int, list[float]] = {1: [], 2: []}
    rtt: dict[int, list[float]] = {1: [], 2: []}
    wall = {1: 0.0, 2: 0.0}
    cpu: dict[int, dict[str, float]] = {k: {"workers": 0.0, "brokers": 0.0, "generator": 0.0}
                                        for k in (1, 2)}
    try:
        gen.sequential(100)
        gen.throughput(min(500, args.requests), args.in_flight)  # warm up
        for r in range(args.rounds):
            second = None
            try:
                for count in (1, 2) if r % 2 == 0 else (2, 1):
                    if count == 2:
                        second = start_worker(1)
                        gen.throughput(200, args.in_flight)  # the second worker warms up
                    elif second is not None:
                        stop(second)
                        second = None
                    procs = [first.pid] + ([second.pid] if second is not None else [])
                    before = ([cpu_seconds(p) for p in procs],
                              [cpu_seconds(p) for p in broker_pids], time.process_time())
                    rps[count].append(gen.throughput(args.requests, args.in_flight))
                    wall[count] += args.requests / rps[count][-1]
                    cpu[count]["workers"] += sum(cpu_seconds(p) for p in procs) - sum(before[0])
                    cpu[count]["brokers"] += sum(cpu_seconds(p) for p in broker_pids) \
                        - sum(before[1])
                    cpu[count]["generator"] += time.process_time() - before[2]
                    rtt[count] += gen.sequential(args.sequential)
            finally:
                if second is not None:
                    stop(second)
    finally:
        stop(first)
    out: dict[str, Any] = {}
    for count in (1, 2):
        per_request = {k: v / (args.rounds * args.requests) * 1e6
                       for k, v in cpu[count].items()}
        out[f"workers_{count}"] = {
            "rps": statistics.median(rps[count]), "rps_rounds": rps[count],
            "rtt_p50_us": percentile_us(rtt[count], 50),
            "rtt_p99_us": percentile_us(rtt[count], 99),
            "cpu_us_per_request": per_request,
            "cpu_bound_ceiling_rps": 2 / (sum(per_request.values()) / 1e6),
            # The share of the 2 cores this setup got while it ran (1.0: the whole machine);
            # well below 1, other processes' load decided the throughput, not the setup.
            "cpu_share_of_machine": sum(cpu[count].values()) / (2 * wall[count]),
        }
    out["throughput_ratio_2_over_1"] = out["workers_2"]["rps"] / out["workers_1"]["rps"]
    out["cpu_model_ratio_2_over_1"] = cpu_model(out["workers_2"], 2) / cpu_model(
        out["workers_1"], 1)
    out["throughput_ratio_by_round"] = [b / a for a, b in zip(rps[1], rps[2], strict=True)]
    return out


def cpu_model(run: dict[str, Any], workers: int, cores: int = 2) -> float:
    """Requests/s the measured CPU costs allow on ``cores`` idle cores: each worker is one
    thread (at most one core), and workers, brokers and load generator share the cores."""
    cost = run["cpu_us_per_request"]
    return min(workers / (cost["workers"] / 1e6), cores / (sum(cost.values()) / 1e6))


def mosquitto_path(bundle: Path, manifest: Manifest, work: Path,
                   args: argparse.Namespace) -> dict[str, Any]:
    from adaptedge.simulator.brokers import MosquittoBroker

    with MosquittoBroker() as broker:
        assert broker._proc is not None
        gen = Generator(broker.url, manifest, qos=1)

        def start(i: int) -> Any:
            return worker(bundle, broker.url, f"w{i + 1}", work / f"mosq-w{i + 1}.log", [])

        try:
            return {"qos": 1, **measure(start, gen, [broker._proc.pid], args)}
        finally:
            gen.client.close()


def nats_path(bundle: Path, manifest: Manifest, work: Path,
              args: argparse.Namespace) -> dict[str, Any]:
    from adaptedge.simulator.nats_cluster import LocalNatsCluster

    with LocalNatsCluster(3, ["bench-dev"], workers=2, workdir=work / "nats") as cluster:
        urls = [n.url for n in cluster.nodes]
        gen = Generator(cluster.mqtt_url(2), manifest, qos=0, user="bench-dev",
                        password=cluster.password("bench-dev"))

        def start(i: int) -> Any:
            name = cluster.workers[i]
            return worker(bundle, ",".join(urls[i:] + urls[:i]), name,
                          work / f"nats-w{i + 1}.log",
                          ["--username", name, "--password-file",
                           str(cluster.config.secret_file(name))])

        pids = [p.pid for p in cluster._procs if p is not None]
        try:
            return {"qos": 0, "nodes": 3, **measure(start, gen, pids, args)}
        finally:
            gen.client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=600, help="requests per throughput run")
    ap.add_argument("--sequential", type=int, default=200, help="round trips per round")
    ap.add_argument("--in-flight", type=int, default=32)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--width", type=int, default=256, help="compute-bound HPC: layer width")
    ap.add_argument("--repeats", type=int, default=1500, help="compute-bound HPC: layers")
    ap.add_argument("--hidden", type=int, default=0, help="use a plain MLP HPC of this width "
                    "instead (its weights stream from memory: two workers share the bandwidth)")
    ap.add_argument("--depth", type=int, default=3, help="plain MLP HPC: hidden layers")
    ap.add_argument("--failure-runs", type=int, default=4)
    ap.add_argument("--skip", default="", help="comma-separated: mosquitto,nats,failure")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="adaptedge-bench-cluster-"))
    try:
        print(json.dumps(run(args, work), indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Everything ``main`` prints, built in ``work``."""
    skip = set(args.skip.split(","))
    if args.hidden:
        hpc_name = f"MLP {args.features}-{args.hidden}x{args.depth}-4"
        manifest = build_bundle(work / "bundle", args.features, hidden=args.hidden,
                                depth=args.depth)
    else:
        hpc_name = (f"MLP {args.features}-{args.width}-4 applying one {args.width}x{args.width} "
                    f"ReLU layer {args.repeats} times (shared weights)")
        manifest = build_bundle(work / "bundle", args.features, hpc_description=hpc_name,
                                hpc=compute_bound_hpc(args.features, args.width, args.repeats))
    result: dict[str, Any] = {"load_average_before": os.getloadavg()}
    if "mosquitto" not in skip:
        result["mosquitto_share"] = mosquitto_path(work / "bundle", manifest, work, args)
    if "nats" not in skip:
        result["nats_queue_group"] = nats_path(work / "bundle", manifest, work, args)
    result["load_average_after_throughput"] = os.getloadavg()
    if "failure" not in skip:
        from adaptedge.simulator.nats_failover import run_node_failure

        light = build_bundle(work / "light", 8, hidden=16)
        result["node_failure"] = [run_node_failure(work / "light", light, rate_per_device=30.0,
                                                   duration_s=14.0, kill_after_s=2.0)
                                  for _ in range(args.failure_runs)]
        result["load_average_after_failure"] = os.getloadavg()
    result["setup"] = {
        "hpc": f"{hpc_name} (onnxruntime, 1 thread)",
        "max_batch": 1, "rounds": args.rounds, "requests_per_run": args.requests,
        "in_flight": args.in_flight, "sequential_per_round": args.sequential,
        "cpus": os.cpu_count(), "python": platform.python_version(), "mqtt": "3.1.1"}
    nats = result.get("nats_queue_group")
    if nats is not None:
        result["pass_nats_2_workers_ge_1_6x"] = nats["throughput_ratio_2_over_1"] >= 1.6
    return result


if __name__ == "__main__":
    main()
