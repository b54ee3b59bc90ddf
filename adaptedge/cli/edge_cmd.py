"""``adaptedge edge run``: a device that replays a dataset through its sensors.

Each row of the split is offered to the runtime as live sensors (each returns the row's values
for that sensor); the runtime reads only what its policy asks for, escalates over MQTT when the
policy says so, and the device publishes telemetry periodically. On exit (end of data, SIGINT or
SIGTERM) it prints a summary. ``--json-out FILE`` streams a journal as it goes (JSON Lines, see
``edge.journal``): a ``start`` line, one ``decision`` line per decision, ``counters`` lines, and
at a clean exit the ``summary``; a killed run loses at most the last ``--fsync-every`` seconds
to a power cut and nothing to ``kill -9``. ``adaptedge edge summary FILE`` rebuilds the summary
from any journal.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import ssl
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from adaptedge.cli import edge_drain
from adaptedge.cli.edge_updates import add_update_options, follow_updates


def register(sub: Any) -> None:
    p = sub.add_parser("edge", help="run the edge runtime on a device")
    edge_sub = p.add_subparsers(dest="edge_command", metavar="ACTION")
    run = edge_sub.add_parser("run", help="replay a dataset through a bundle's policy, "
                              "escalating to the cloud over MQTT")
    run.add_argument("--bundle", required=True, help="bundle directory or .tar")
    run.add_argument("--trust", action="append", type=Path, metavar="PUBKEY",
                     help="load only a bundle signed by this public key (repeatable)")
    run.add_argument("--broker", help="mqtt://HOST:PORT, mqtts://HOST:PORT or HOST:PORT; a "
                     "comma-separated list fails over in order (e.g. a NATS cluster's MQTT "
                     "listeners); omit to run offline: escalations answer degraded")
    run.add_argument("--qos", type=int, choices=(0, 1), default=1, help="MQTT QoS of requests "
                     "and replies (default 1; 0 for a NATS cluster's MQTT listeners)")
    run.add_argument("--device", default="edge", help="device id (topic segment)")
    run.add_argument("--prefix", default="adaptedge", help="topic prefix (default adaptedge), "
                     "as cloud serve --prefix")
    run.add_argument("--username", help="broker user name (else user@ in the URL, else "
                     "$ADAPTEDGE_MQTT_USERNAME)")
    run.add_argument("--password-file", type=Path, help="file whose first line is the password "
                     "(else $ADAPTEDGE_MQTT_PASSWORD_FILE)")
    run.add_argument("--tls-ca", type=Path, help="CA certificate file: connect with TLS")
    run.add_argument("--tls-cert", type=Path, help="client certificate (with --tls-key)")
    run.add_argument("--tls-key", type=Path)
    point = run.add_mutually_exclusive_group()
    point.add_argument("--operating-point", help="operating point name")
    point.add_argument("--budget", type=float,
                       help="pick the most accurate operating point costing at most this")
    run.add_argument("--replay", required=True, metavar="DATA",
                     help="dataset name or CSV/TSV path (trainer.data.datasets.load_dataset)")
    run.add_argument("--target", metavar="COL", help="label column of a CSV/TSV --replay file")
    run.add_argument("--costs", help="costs file of the data (a [size] column: each item is "
                     "charged its own size's cost)")
    run.add_argument("--split", default="test", choices=("train", "validation", "test"))
    run.add_argument("--limit", type=int, help="replay at most N rows")
    run.add_argument("--rate", type=float, help="decisions per second (default: as fast as "
                     "possible)")
    run.add_argument("--telemetry-every", type=float, default=10.0, metavar="S",
                     help="publish telemetry every S seconds (0: only at exit)")
    run.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                     help="wait up to S seconds for the broker before starting")
    run.add_argument("--sensor-timeout", type=float, metavar="MS",
                     help="timeout of a sensor read when the bundle sets none (default: "
                     "edge.sensors.DEFAULT_TIMEOUT_MS, 1000 ms; inf: no timeout)")
    run.add_argument("--outbox", type=Path, help="record escalated inputs in this directory")
    run.add_argument("--json-out", type=Path, metavar="FILE",
                     help="stream every decision here as JSON Lines, the summary last "
                     "('-': standard output; the text summary then goes to stderr)")
    run.add_argument("--fsync-every", type=float, default=1.0, metavar="S",
                     help="fsync --json-out at most every S seconds (default 1; 0: every line)")
    edge_drain.add_run_options(run)
    add_update_options(run)
    run.set_defaults(handler=run_device)
    edge_drain.register_drain(edge_sub)
    summary = edge_sub.add_parser("summary", help="rebuild the summary of an edge run's "
                                  "--json-out journal (a killed run's too)")
    summary.add_argument("journal", type=Path, help="the JSON Lines file of edge run --json-out")
    summary.add_argument("--json", action="store_true", help="print the summary as JSON")
    summary.set_defaults(handler=summarize_journal)
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


def summarize_journal(args: argparse.Namespace) -> int:
    from adaptedge.cli.main import CommandError
    from adaptedge.edge.journal import read_journal, summarize

    what = f"cannot read {args.journal} as an edge run journal (JSON Lines of edge run " \
        "--json-out)"
    try:
        lines = read_journal(args.journal)
        if not any("kind" in line for line in lines):
            raise CommandError(f"{what}: no line has a 'kind'")
        summary = summarize(lines)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CommandError(f"{what}: {exc}") from exc
    print(json.dumps(summary, indent=2) if args.json else _render(summary))
    return 0


def _check_options(args: argparse.Namespace) -> None:
    from adaptedge.cli.main import CommandError

    if args.limit is not None and args.limit < 1:
        raise CommandError(f"--limit must be >= 1, got {args.limit}")
    if args.rate is not None and not (args.rate > 0 and math.isfinite(args.rate)):
        raise CommandError(f"--rate must be a positive number, got {args.rate}")
    if not 0 <= args.fsync_every < math.inf:
        raise CommandError(f"--fsync-every must be >= 0 seconds (finite), got "
                           f"{args.fsync_every}")


def _replay_data(args: argparse.Namespace) -> tuple[Any, np.ndarray, np.ndarray]:
    from adaptedge.cli.evaluate import check_split, replay_seed
    from adaptedge.cli.main import CommandError
    from adaptedge.protocol.bundle import open_bundle, read_manifest
    from adaptedge.trainer.data.datasets import load_dataset

    with open_bundle(args.bundle) as root:
        recipe = read_manifest(root).split
    seed = replay_seed(recipe, args.replay)  # the rows the bundle was not trained on
    try:
        dataset = load_dataset(args.replay, target=args.target, costs=args.costs, seed=seed)
        X, y = dataset.split(args.split)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    check_split(recipe, dataset, seed)
    if args.limit is not None:
        X, y = X[: args.limit], y[: args.limit]
    sizes = dataset.split_sizes(args.split)
    args.sizes = None if sizes is None else sizes[: len(X)]  # each item's own size
    return dataset, X, y


def _start_runtime(args: argparse.Namespace, dataset: Any) -> tuple[Any, Any]:
    """The runtime and its uplink (started, or None offline), checked against the data."""
    from adaptedge.cli.broker import resolve_broker
    from adaptedge.cli.main import CommandError
    from adaptedge.edge import EdgeRuntime, MqttUplink, Outbox

    uplink = None
    if args.broker:
        logins = [resolve_broker(url, username=args.username, password_file=args.password_file)
                  for url in args.broker.split(",") if url.strip()]
        if not logins:
            raise CommandError("--broker is empty: give mqtt://HOST:PORT[,mqtt://HOST:PORT...]")
        login = logins[0]
        uplink = MqttUplink([x.url for x in logins], args.device, username=login.username,
                            password=login.password, tls=_tls(args), prefix=args.prefix,
                            qos=args.qos)
    timeouts = None if args.sensor_timeout is None else {"*": args.sensor_timeout}
    rt = EdgeRuntime.load(args.bundle, uplink=uplink, device_id=args.device, trust=args.trust,
                          operating_point=args.operating_point if args.budget is None
                          else args.budget, sensor_timeouts_ms=timeouts,
                          outbox=Outbox(args.outbox) if args.outbox else None,
                          audit=edge_drain.audit_policy(args))
    if tuple(rt.manifest.feature_names) != tuple(dataset.feature_names):
        rt.close()
        raise CommandError(
            f"bundle features {list(rt.manifest.feature_names)[:4]}... do not match dataset "
            f"{args.replay!r} features {list(dataset.feature_names)[:4]}...: replay the data the "
            "bundle was trained on")
    if uplink is not None:
        uplink.start()
        if not uplink.wait_connected(args.connect_timeout):
            print(f"adaptedge: warning: not connected to {args.broker} after "
                  f"{args.connect_timeout:g} s ({uplink.last_error}); escalations answer "
                  "degraded until it is reachable", file=sys.stderr)
    return follow_updates(args, rt, uplink), uplink


class _Log:
    """The run's lines (kept for the summary) and, with --json-out, their journal."""

    def __init__(self, args: argparse.Namespace) -> None:
        from adaptedge.cli.main import CommandError
        from adaptedge.edge.journal import DecisionJournal

        self.lines: list[dict[str, Any]] = []
        self.latencies: list[float] = []
        try:
            self.to_stdout = str(args.json_out) == "-"
            self.journal = None if args.json_out is None else DecisionJournal(
                "/dev/stdout" if self.to_stdout else args.json_out,
                fsync_every_s=args.fsync_every)
        except OSError as exc:
            raise CommandError(f"cannot write --json-out {args.json_out}: {exc}") from exc

    def write(self, kind: str, record: dict[str, Any]) -> None:
        self.lines.append({"kind": kind, **record})
        if self.journal is not None:
            self.journal.write(kind, record)

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()


def _run_device(args: argparse.Namespace, stop: dict[str, bool]) -> int:
    from adaptedge.edge.journal import summarize

    _check_options(args)
    dataset, X, y = _replay_data(args)
    log = _Log(args)
    try:
        rt, uplink = _start_runtime(args, dataset)
        log.write("start", {"device": args.device, "bundle_id": rt.manifest.bundle_id,
                            "operating_point": rt.operating_point, "replay": str(args.replay),
                            "split": args.split, "rows": len(X), "started_at": time.time()})
        drainer = edge_drain.start_drain(args, rt, uplink)
        read = edge_drain.device_counters(rt, drainer)  # the runtime's + the outbox backlog
        try:
            _replay(args, rt, uplink, log, [dataset.classes[int(t)] for t in y], X, stop, read)
        finally:
            edge_drain.finish_drain(args, drainer, stop["flag"])
            if uplink is not None:
                uplink.publish_telemetry(_telemetry(read(), log.latencies))
                time.sleep(0.05)  # let the last telemetry leave
                uplink.close()
            rt.close()
        counters = read()
        log.write("counters", {"counters": counters})
        summary = summarize(log.lines)
        summary["interrupted"] = stop["flag"]
        log.write("summary", summary)
    finally:
        log.close()
    print(_render(summary) + "\n" + edge_drain.audit_line(counters),
          file=sys.stderr if log.to_stdout else sys.stdout)
    return 0


def _replay(args: argparse.Namespace, rt: Any, uplink: Any, log: _Log, truth: list[str],
            X: np.ndarray, stop: dict[str, bool],
            counters: Callable[[], dict[str, float]]) -> None:
    current: dict[str, np.ndarray] = {}
    sensors = {s.name: _reader(current, s.name) for s in rt.manifest.sensors}
    columns = {s.name: np.asarray(s.features, dtype=np.intp) for s in rt.manifest.sensors}
    rate = f" at {args.rate:g} Hz" if args.rate else ""
    print(f"adaptedge edge: device {args.device} replaying {len(X)} rows of {args.replay} "
          f"({args.split}){rate}, operating point {rt.operating_point}", file=sys.stderr,
          flush=True)
    sizes = getattr(args, "sizes", None)
    started = time.monotonic()
    warned: set[str] = set()
    every = args.telemetry_every
    next_telemetry = started + every if every > 0 else math.inf
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
        d = rt.predict(sensors, size=None if sizes is None else float(sizes[i]))
        if d.error in _LOUD_ERRORS and d.error not in warned:
            warned.add(d.error)
            print(f"adaptedge edge: warning: {_LOUD_ERRORS[d.error]} (first at row {i})",
                  file=sys.stderr, flush=True)
        log.latencies.append(d.timings["total"] * 1000.0)
        log.write("decision", _record(i, d, truth[i], time.monotonic() - started))
        if time.monotonic() >= next_telemetry:
            now = counters()
            log.write("counters", {"counters": now})
            if uplink is not None:
                uplink.publish_telemetry(_telemetry(now, log.latencies))
            next_telemetry = time.monotonic() + every


_LOUD_ERRORS = {
    "unknown_bundle": "the cloud does not serve this bundle: escalations answer unknown_bundle "
                      "and degrade; run cloud serve with the same bundle",
    "bad_topic": "the cloud refused the request topic: check --device and --prefix against "
                 "cloud serve --prefix and the broker ACL",
}
"""Cloud errors that repeat for every escalation until someone fixes the set-up."""


def _reader(current: dict[str, np.ndarray], name: str) -> Any:
    return lambda: current[name]


def _record(index: int, d: Any, truth: str, t_s: float) -> dict[str, Any]:
    cost = d.cost
    return {
        "index": index,
        "t_s": t_s,
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
        "bundle_id": d.bundle_id,
    }


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def _telemetry(counters: dict[str, float], latencies: list[float]) -> dict[str, float]:
    recent = latencies[-1000:]
    out = dict(counters)
    out["latency_p50_ms"] = _percentile(recent, 50)
    out["latency_p99_ms"] = _percentile(recent, 99)
    return out


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
        *_reasons(s),
    ])


def _reasons(s: dict[str, Any]) -> list[str]:
    """The degraded decisions by reason, loudest first (absent in journals of old runs)."""
    reasons = s.get("degraded_by_reason") or {}
    if not reasons:
        return []
    lines = ["degraded by reason: " + ", ".join(f"{k} {v}" for k, v in reasons.items())]
    lines += [f"  {k}: {_LOUD_ERRORS[k]}" for k in reasons if k in _LOUD_ERRORS]
    if reasons.get("deadline") and not (s.get("by_source") or {}).get("cloud"):
        lines.append("  deadline: no cloud answer arrived at all: is cloud serve running on this "
                     "broker with the same --prefix?")
    return lines
