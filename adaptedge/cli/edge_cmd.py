"""``adaptedge edge run``: a device that replays a dataset through its sensors.

Each row of the split is offered to the runtime as live sensors (each returns the row's values
for that sensor); the runtime reads only what its policy asks for, escalates over MQTT when the
policy says so, and the device publishes telemetry periodically. On exit (end of data, SIGINT or
SIGTERM) it prints a summary and, with ``--json-out``, writes every decision.
"""

from __future__ import annotations

import argparse
import json
import signal
import ssl
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np


def register(sub: Any) -> None:
    p = sub.add_parser("edge", help="run the edge runtime on a device")
    edge_sub = p.add_subparsers(dest="edge_command", metavar="ACTION")
    run = edge_sub.add_parser("run", help="replay a dataset through a bundle's policy, "
                              "escalating to the cloud over MQTT")
    run.add_argument("--bundle", required=True, help="bundle directory or .tar")
    run.add_argument("--trust", action="append", type=Path, metavar="PUBKEY",
                     help="load only a bundle signed by this public key (repeatable)")
    run.add_argument("--broker", help="mqtt://HOST:PORT or mqtts://HOST:PORT "
                     "(omit to run offline: escalations answer degraded)")
    run.add_argument("--device", default="edge", help="device id (topic segment)")
    run.add_argument("--username")
    run.add_argument("--password-file", type=Path, help="file whose first line is the password")
    run.add_argument("--tls-ca", type=Path, help="CA certificate file: connect with TLS")
    run.add_argument("--tls-cert", type=Path, help="client certificate (with --tls-key)")
    run.add_argument("--tls-key", type=Path)
    point = run.add_mutually_exclusive_group()
    point.add_argument("--operating-point", help="operating point name")
    point.add_argument("--budget", type=float,
                       help="pick the most accurate operating point costing at most this")
    run.add_argument("--replay", required=True, metavar="DATA",
                     help="dataset name or CSV path (trainer.datasets.load_dataset)")
    run.add_argument("--split", default="test", choices=("train", "validation", "test"))
    run.add_argument("--limit", type=int, help="replay at most N rows")
    run.add_argument("--rate", type=float, help="decisions per second (default: as fast as "
                     "possible)")
    run.add_argument("--telemetry-every", type=float, default=10.0, metavar="S",
                     help="publish telemetry every S seconds (0: only at exit)")
    run.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                     help="wait up to S seconds for the broker before starting")
    run.add_argument("--outbox", type=Path, help="record escalated inputs in this directory")
    run.add_argument("--json-out", type=Path, help="write the summary and every decision here")
    run.set_defaults(handler=run_device)
    p.set_defaults(handler=lambda args: (p.print_help(), 0)[1])


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    from adaptedge.cli.main import CommandError

    if args.tls_ca is None and args.tls_cert is None:
        return None
    if (args.tls_cert is None) != (args.tls_key is None):
        raise CommandError("--tls-cert and --tls-key go together")
    context = ssl.create_default_context(cafile=str(args.tls_ca) if args.tls_ca else None)
    if args.tls_cert is not None:
        context.load_cert_chain(str(args.tls_cert), str(args.tls_key))
    return context


def _password(path: Path | None) -> str | None:
    """The first line of ``--password-file``; an empty file is one clear error."""
    from adaptedge.cli.main import CommandError

    if path is None:
        return None
    lines = path.read_text().splitlines()
    if not lines or not lines[0].strip():
        raise CommandError(f"the password file {path} is empty: put the password on its "
                           "first line")
    return lines[0].strip()


def run_device(args: argparse.Namespace) -> int:
    from adaptedge.cli.main import CommandError
    from adaptedge.edge import EdgeError
    from adaptedge.protocol.errors import BundleError

    stop = {"flag": False}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop["flag"] = True

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _run_device(args, stop)
    except BundleError:
        raise  # main reports it, naming the file
    except EdgeError as exc:
        raise CommandError(str(exc)) from exc
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _run_device(args: argparse.Namespace, stop: dict[str, bool]) -> int:
    from adaptedge.cli.main import CommandError
    from adaptedge.edge import EdgeRuntime, MqttUplink, Outbox
    from adaptedge.trainer.datasets import load_dataset

    if args.limit is not None and args.limit < 1:
        raise CommandError(f"--limit must be >= 1, got {args.limit}")
    if args.rate is not None and args.rate <= 0:
        raise CommandError(f"--rate must be positive, got {args.rate}")
    try:
        dataset = load_dataset(args.replay)
        X, y = dataset.split(args.split)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if args.limit is not None:
        X, y = X[: args.limit], y[: args.limit]

    password = _password(args.password_file)
    uplink = None
    if args.broker:
        uplink = MqttUplink(args.broker, args.device, username=args.username,
                            password=password, tls=_tls(args))
    rt = EdgeRuntime.load(args.bundle, uplink=uplink, device_id=args.device, trust=args.trust,
                          operating_point=args.operating_point if args.budget is None
                          else args.budget,
                          outbox=Outbox(args.outbox) if args.outbox else None)
    if tuple(rt.manifest.feature_names) != tuple(dataset.feature_names):
        raise CommandError(
            f"bundle features {list(rt.manifest.feature_names)[:4]}... do not match dataset "
            f"{args.replay!r} features {list(dataset.feature_names)[:4]}...: replay the data the "
            "bundle was trained on")
    classes = list(rt.manifest.classes)
    truth_names = [dataset.classes[int(t)] for t in y]

    if uplink is not None:
        uplink.start()
        if not uplink.wait_connected(args.connect_timeout):
            print(f"adaptedge: warning: not connected to {args.broker} after "
                  f"{args.connect_timeout:g} s ({uplink.last_error}); escalations answer "
                  "degraded until it is reachable", file=sys.stderr)

    current: dict[str, np.ndarray] = {}
    sensors = {s.name: _reader(current, s.name) for s in rt.manifest.sensors}
    columns = {s.name: np.asarray(s.features, dtype=np.intp) for s in rt.manifest.sensors}
    records: list[dict[str, Any]] = []
    latencies: list[float] = []
    rate = f" at {args.rate:g} Hz" if args.rate else ""
    print(f"adaptedge edge: device {args.device} replaying {len(X)} rows of {args.replay} "
          f"({args.split}){rate}, operating point {rt.operating_point}", file=sys.stderr,
          flush=True)
    started = time.monotonic()
    next_telemetry = started + args.telemetry_every if args.telemetry_every > 0 else float("inf")
    try:
        for i in range(len(X)):
            if stop["flag"]:
                break
            if args.rate:
                wait = started + i / args.rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            row = X[i]
            for name, cols in columns.items():
                current[name] = row[cols]
            d = rt.predict(sensors)
            latencies.append(d.timings["total"] * 1000.0)
            records.append(_record(i, d, truth_names[i], classes))
            if uplink is not None and time.monotonic() >= next_telemetry:
                uplink.publish_telemetry(_telemetry(rt.counters, latencies))
                next_telemetry = time.monotonic() + args.telemetry_every
    finally:
        if uplink is not None:
            uplink.publish_telemetry(_telemetry(rt.counters, latencies))
            time.sleep(0.05)  # let the last telemetry leave
            uplink.close()
        rt.close()
    summary = _summary(records, latencies, rt.counters, time.monotonic() - started)
    summary.update(device=args.device, bundle_id=rt.manifest.bundle_id,
                   operating_point=rt.operating_point, interrupted=stop["flag"])
    print(_render(summary))
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json_out.with_suffix(args.json_out.suffix + ".tmp")
        tmp.write_text(json.dumps({"summary": summary, "decisions": records}) + "\n")
        tmp.replace(args.json_out)
    return 0


def _reader(current: dict[str, np.ndarray], name: str) -> Any:
    return lambda: current[name]


def _record(index: int, d: Any, truth: str, classes: list[str]) -> dict[str, Any]:
    cost = d.cost
    return {
        "index": index,
        "label": d.label,
        "label_index": d.label_index,
        "truth": truth,
        "correct": d.label == truth,
        "source": d.source,
        "escalated": d.escalated,
        "sensors": list(d.sensors_read),
        "failed_sensors": d.failed_sensors,
        "nodes": list(d.nodes),
        "cost": {"energy_mj": cost.energy_mj, "latency_ms": cost.latency_ms,
                 "money": cost.money, "bytes": cost.bytes, "scalar": cost.scalar},
        "latency_ms": d.timings["total"] * 1000.0,
        "cloud_ms": d.timings["cloud"] * 1000.0,
        "request_id": d.request_id,
        "error": d.error,
    }


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def _telemetry(counters: dict[str, float], latencies: list[float]) -> dict[str, float]:
    recent = latencies[-1000:]
    out = dict(counters)
    out["latency_p50_ms"] = _percentile(recent, 50)
    out["latency_p99_ms"] = _percentile(recent, 99)
    return out


def _summary(records: list[dict[str, Any]], latencies: list[float],
             counters: dict[str, float], wall_s: float) -> dict[str, Any]:
    n = len(records)
    by_source = {s: sum(r["source"] == s for r in records) for s in ("local", "cloud", "degraded")}

    def mean(key: str) -> float:
        return sum(r["cost"][key] for r in records) / n if n else float("nan")

    return {
        "decisions": n,
        "by_source": by_source,
        "accuracy": sum(r["correct"] for r in records) / n if n else float("nan"),
        "escalation_rate": sum(r["escalated"] for r in records) / n if n else float("nan"),
        "sensor_failures": counters.get("sensor_failures", 0.0),
        "late_replies": counters.get("late_replies", 0.0),
        "duplicate_replies": counters.get("duplicate_replies", 0.0),
        "mean_cost": {k: mean(k) for k in ("scalar", "energy_mj", "latency_ms", "money",
                                           "bytes")},
        "latency_p50_ms": _percentile(latencies, 50),
        "latency_p99_ms": _percentile(latencies, 99),
        "wall_s": wall_s,
    }


def _render(s: dict[str, Any]) -> str:
    src = s["by_source"]
    cost = s["mean_cost"]
    return "\n".join([
        f"device {s['device']}  bundle {s['bundle_id']}  operating point {s['operating_point']}"
        + ("  (interrupted)" if s["interrupted"] else ""),
        f"decisions {s['decisions']}: local {src['local']}, cloud {src['cloud']}, "
        f"degraded {src['degraded']}  (escalation rate {s['escalation_rate']:.3f})",
        f"accuracy {s['accuracy']:.4f}",
        f"mean cost: {cost['scalar']:.4g} (scalar), {cost['energy_mj']:.4g} mJ, "
        f"{cost['latency_ms']:.4g} ms sensing+link, {cost['money']:.4g} money, "
        f"{cost['bytes']:.4g} B",
        f"decision latency p50 {s['latency_p50_ms']:.3f} ms, p99 {s['latency_p99_ms']:.3f} ms "
        f"({s['wall_s']:.2f} s wall)",
        f"sensor failures {s['sensor_failures']:g}, late replies {s['late_replies']:g}, "
        f"duplicate replies {s['duplicate_replies']:g}",
    ])
