"""``adaptedge edge run``: a device that replays a dataset through its sensors.

Each row of the split is offered to the runtime as live sensors (each returns the row's values
for that sensor); the runtime reads only what its policy asks for, escalates over MQTT when the
policy says so, and the device publishes telemetry periodically. On exit (end of data, SIGINT or
SIGTERM) it prints a summary. ``--json-out FILE`` streams a journal as it goes (JSON Lines, see
``edge.journal``): a ``start`` line, one ``decision`` line per decision, ``counters`` lines, and
at a clean exit the ``summary``; a killed run loses at most the last ``--fsync-every`` seconds
to a power cut and nothing to ``kill -9``. ``adaptedge edge summary FILE`` rebuilds the summary
from any journal. The run itself is ``edge.device``'s: this module parses the options, loads
the data and prints.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from adaptedge.cli import edge_drain
from adaptedge.cli.errors import CommandError

if TYPE_CHECKING:
    from adaptedge.edge.device import DeviceOptions, ReplayRows, RunLog
    from adaptedge.edge.mqtt_uplink import MqttUplink


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
    run.set_defaults(handler=run_device)
    edge_drain.register_drain(edge_sub)
    summary = edge_sub.add_parser("summary", help="rebuild the summary of an edge run's "
                                  "--json-out journal (a killed run's too)")
    summary.add_argument("journal", type=Path, help="the JSON Lines file of edge run --json-out")
    summary.add_argument("--json", action="store_true", help="print the summary as JSON")
    summary.set_defaults(handler=summarize_journal)
    p.set_defaults(handler=lambda args: (p.print_help(), 0)[1])


def run_device(args: argparse.Namespace) -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _run_device(args, stop)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def summarize_journal(args: argparse.Namespace) -> int:
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


def _options(args: argparse.Namespace) -> DeviceOptions:
    """``edge run``'s options as ``edge.device`` takes them (refusing bad ones first)."""
    from adaptedge.edge.device import DeviceOptions

    if args.limit is not None and args.limit < 1:
        raise CommandError(f"--limit must be >= 1, got {args.limit}")
    if not 0 <= args.fsync_every < math.inf:
        raise CommandError(f"--fsync-every must be >= 0 seconds (finite), got "
                           f"{args.fsync_every}")
    return DeviceOptions(
        bundle=Path(args.bundle), device=args.device, prefix=args.prefix,
        trust=tuple(args.trust or ()),
        operating_point=args.operating_point if args.budget is None else args.budget,
        sensor_timeout_ms=args.sensor_timeout, outbox=args.outbox,
        audit=edge_drain.audit_policy(args), rate_hz=args.rate,
        telemetry_every_s=args.telemetry_every, connect_timeout_s=args.connect_timeout,
        drain=args.drain, drain_rate_per_s=args.drain_rate, drain_wait_s=args.drain_wait,
        follow_updates=args.follow_updates, updates_dir=args.updates_dir)


def _replay_rows(args: argparse.Namespace) -> ReplayRows:
    """The rows of ``--replay`` the bundle was not trained on (``--split``, ``--limit``)."""
    from adaptedge.cli.evaluate import check_split, recipe_validation, replay_seed
    from adaptedge.edge.device import ReplayRows
    from adaptedge.protocol.bundle import open_bundle, read_manifest
    from adaptedge.trainer.data.bundle_data import load_for_bundle

    with open_bundle(args.bundle) as root:
        manifest = read_manifest(root)
    recipe = manifest.split
    seed = replay_seed(recipe, args.replay)  # the rows the bundle was not trained on
    try:
        dataset = load_for_bundle(args.replay, manifest, target=args.target, costs=args.costs,
                                  seed=seed)
        dataset = recipe_validation(recipe, dataset, seed)  # train --val-fraction's split
        X, y = dataset.split(args.split)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    check_split(recipe, dataset, seed)
    # a regression row's truth is its target as text (the journal's abs_error parses it)
    truth = ([repr(float(t)) for t in dataset.targets(args.split)] if dataset.is_regression
             else [dataset.classes[int(t)] for t in y])
    if args.limit is not None:
        X, truth = X[: args.limit], truth[: args.limit]
    sizes = dataset.split_sizes(args.split)
    return ReplayRows(X, truth, dataset.feature_names,
                      source=str(args.replay), split=args.split,
                      sizes=None if sizes is None else sizes[: len(X)])  # each item's own size


def _uplink(args: argparse.Namespace) -> MqttUplink | None:
    """The uplink of ``--broker`` (not started; None: offline)."""
    if not args.broker:
        return None
    from adaptedge.cli.broker import resolve_broker, tls_context
    from adaptedge.edge import MqttUplink

    logins = [resolve_broker(url, username=args.username, password_file=args.password_file)
              for url in args.broker.split(",") if url.strip()]
    if not logins:
        raise CommandError("--broker is empty: give mqtt://HOST:PORT[,mqtt://HOST:PORT...]")
    login = logins[0]
    return MqttUplink([x.url for x in logins], args.device, username=login.username,
                      password=login.password, tls=tls_context(args), prefix=args.prefix,
                      qos=args.qos)


def _run_log(args: argparse.Namespace) -> RunLog:
    """The run's log, streamed to ``--json-out`` ('-': standard output) when given."""
    from adaptedge.edge.device import RunLog
    from adaptedge.edge.journal import DecisionJournal

    if args.json_out is None:
        return RunLog()
    to_stdout = str(args.json_out) == "-"
    try:
        return RunLog(DecisionJournal("/dev/stdout" if to_stdout else args.json_out,
                                      fsync_every_s=args.fsync_every))
    except OSError as exc:
        raise CommandError(f"cannot write --json-out {args.json_out}: {exc}") from exc


def _say(text: str) -> None:
    print(f"adaptedge edge: {text}", file=sys.stderr, flush=True)


def _run_device(args: argparse.Namespace, stop: threading.Event) -> int:
    from adaptedge.edge.device import run_device, start_runtime

    options = _options(args)
    rows = _replay_rows(args)
    log = _run_log(args)
    try:
        uplink = _uplink(args)
        rt = start_runtime(options, uplink, rows, _say)
        rate = f" at {args.rate:g} Hz" if args.rate else ""
        _say(f"device {args.device} replaying {len(rows)} rows of {args.replay} "
             f"({args.split}){rate}, operating point {rt.operating_point}")
        run = run_device(rt, uplink, rows, options, log, stop, _say)
    finally:
        log.close()
    lost = run.summary.get("uplink_connected") is False and args.outbox is None
    print(_render(run.summary) + "\n" + edge_drain.audit_line(run.counters)
          + _uplink_line(run.summary, args, lost),
          file=sys.stderr if str(args.json_out) == "-" else sys.stdout)
    return 1 if lost else 0


def _uplink_line(s: dict[str, Any], args: argparse.Namespace, lost: bool) -> str:
    """Said when ``--broker`` never answered during the run (nothing otherwise)."""
    if s.get("uplink_connected") is not False:
        return ""
    kept = ("escalated inputs were kept in --outbox: forward them with edge drain" if not lost
            else "no --outbox kept them: exit status 1")
    return (f"\nuplink: never connected to {args.broker} during the run; every escalation "
            f"answered degraded ({kept})")


def _render(s: dict[str, Any]) -> str:
    src = s["by_source"]
    cost = s["mean_cost"]
    return "\n".join([
        f"device {s['device']}  bundle {s['bundle_id']}  operating point {s['operating_point']}"
        + ("  (interrupted)" if s["interrupted"] else ""),
        *_swaps(s),
        f"decisions {s['decisions']}: local {src['local']}, cloud {src['cloud']}, "
        f"degraded {src['degraded']}  (escalation rate {s['escalation_rate']:.3f})",
        f"accuracy {s['accuracy']:.4f}" if "mse" not in s else  # regression: error in units
        f"mse {s['mse']:.6g}, mae {s['mae']:.6g} over {s['scored']} rows with a target",
        f"mean cost: {cost['scalar']:.4g} (scalar), {cost['energy_mj']:.4g} mJ, "
        f"{cost['latency_ms']:.4g} ms sensing+link, {cost['money']:.4g} money, "
        f"{cost['bytes']:.4g} B",
        f"decision latency p50 {s['latency_p50_ms']:.3f} ms, p99 {s['latency_p99_ms']:.3f} ms "
        f"({s['wall_s']:.2f} s wall)",
        f"sensor failures {s['sensor_failures']:g}, late replies {s['late_replies']:g}, "
        f"duplicate replies {s['duplicate_replies']:g}",
        *_reasons(s),
    ])


def _swaps(s: dict[str, Any]) -> list[str]:
    """Which bundles answered, when an over-the-air update swapped them during the run."""
    answered = s.get("answered_by") or []
    if len(answered) < 2:
        return []
    return ["answered by: " + ", then ".join(
        f"bundle {a['bundle_id']} at {a['operating_point']} ({a['decisions']} decisions)"
        for a in answered)]


def _reasons(s: dict[str, Any]) -> list[str]:
    """The degraded decisions by reason, loudest first (absent in journals of old runs)."""
    from adaptedge.edge.device.loop import LOUD_ERRORS

    reasons = s.get("degraded_by_reason") or {}
    if not reasons:
        return []
    lines = ["degraded by reason: " + ", ".join(f"{k} {v}" for k, v in reasons.items())]
    lines += [f"  {k}: {LOUD_ERRORS[k]}" for k in reasons if k in LOUD_ERRORS]
    if reasons.get("deadline") and not (s.get("by_source") or {}).get("cloud"):
        lines.append("  deadline: no cloud answer arrived at all: is cloud serve running on this "
                     "broker with the same --prefix?")
    return lines
