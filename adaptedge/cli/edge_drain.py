"""``adaptedge edge drain`` (forward an outbox to the cloud once and exit) and the fleet options
of ``edge run`` (audit sampling, background drain of the outbox, following updates; the run
itself is ``edge.device``'s)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from adaptedge.protocol.audit import DEFAULT_AUDIT_FRACTION


def add_run_options(run: Any) -> None:
    run.add_argument("--audit-fraction", type=float, default=DEFAULT_AUDIT_FRACTION,
                     metavar="F", help="with --outbox: also read the HPC's sensors for this "
                     "fraction of locally answered decisions and keep them for an HPC label "
                     f"(default {DEFAULT_AUDIT_FRACTION:g}; 0: no audits)")
    run.add_argument("--audit-seed", type=int, default=0, metavar="S",
                     help="seed of the audit choice (protocol.audit; default 0)")
    run.add_argument("--no-drain", dest="drain", action="store_false",
                     help="with --outbox and --broker: do not forward the outbox to the cloud "
                     "in the background (edge drain can do it later)")
    run.add_argument("--drain-rate", type=float, default=50.0, metavar="N",
                     help="forward at most N outbox records a second (default 50)")
    run.add_argument("--drain-wait", type=float, default=5.0, metavar="S",
                     help="at the end of the data, wait up to S seconds for the outbox to be "
                     "forwarded while the link is up (default 5; the rest goes next time)")
    run.add_argument("--follow-updates", action="store_true",
                     help="take signed bundle updates announced over MQTT while running "
                     "(needs --broker and --trust): verify, swap between decisions, probation, "
                     "automatic rollback")
    run.add_argument("--updates-dir", type=Path, metavar="DIR",
                     help="where updates are downloaded and kept (default: "
                     "./adaptedge-updates/<device>)")


def register_drain(edge_sub: Any) -> None:
    d = edge_sub.add_parser("drain", help="forward an outbox to the cloud's store once and "
                            "exit when it is empty")
    d.add_argument("--outbox", required=True, type=Path, help="the outbox folder of edge run")
    d.add_argument("--broker", required=True, help="mqtt://HOST:PORT or mqtts://HOST:PORT")
    d.add_argument("--device", required=True, help="device id (whose outbox it is)")
    d.add_argument("--prefix", default="adaptedge", help="topic prefix (default adaptedge)")
    d.add_argument("--username", help="broker user name (else user@ in the URL, else "
                   "$ADAPTEDGE_MQTT_USERNAME)")
    d.add_argument("--password-file", type=Path, help="file whose first line is the password")
    d.add_argument("--tls-ca", type=Path, help="CA certificate file: connect with TLS")
    d.add_argument("--tls-cert", type=Path, help="client certificate (with --tls-key)")
    d.add_argument("--tls-key", type=Path)
    d.add_argument("--rate", type=float, default=200.0, metavar="N",
                   help="at most N records a second (default 200)")
    d.add_argument("--window", type=int, default=64, metavar="N",
                   help="at most N records awaiting acknowledgement (default 64)")
    d.add_argument("--ack-timeout", type=float, default=5.0, metavar="S",
                   help="send a record again after S seconds without acknowledgement")
    d.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="give up after S seconds (exit status 1; default 300)")
    d.add_argument("--json", action="store_true", help="print the counters as JSON")
    d.set_defaults(handler=drain)


def audit_policy(args: argparse.Namespace) -> Any:
    from adaptedge.cli.errors import CommandError
    from adaptedge.protocol.audit import AuditPolicy

    try:
        return AuditPolicy(fraction=args.audit_fraction, seed=args.audit_seed)
    except ValueError as exc:
        raise CommandError(f"--audit-fraction: {exc}") from exc


def audit_line(counters: dict[str, float]) -> str:
    """What the audits cost, on its own (for the run's summary)."""
    n, decisions = counters.get("audits", 0.0), counters.get("decisions", 0.0)
    per = counters.get("audit_cost", 0.0) / decisions if decisions else 0.0
    line = (f"audits {n:g} (assurance cost: {counters.get('audit_cost', 0.0):.4g} scalar, "
            f"{per:.4g} per decision; {counters.get('audit_energy_mj', 0.0):.4g} mJ, "
            f"{counters.get('audit_bytes', 0.0):.4g} B link)")
    if "drain_stored" in counters:
        line += (f"; outbox forwarded {counters['drain_stored'] + counters['drain_duplicates']:g}"
                 f", {counters.get('outbox_records', 0.0):g} left")
    return line


def drain(args: argparse.Namespace) -> int:
    from adaptedge.cli.broker import resolve_broker, tls_context
    from adaptedge.cli.errors import CommandError
    from adaptedge.edge import MqttUplink, Outbox
    from adaptedge.edge.drain import OutboxDrainer

    if not args.outbox.is_dir():
        raise CommandError(f"--outbox {args.outbox} is not a folder (edge run --outbox makes one)")
    login = resolve_broker(args.broker, username=args.username, password_file=args.password_file)
    outbox = Outbox(args.outbox)
    started = time.monotonic()
    with MqttUplink(login.url, args.device, username=login.username, password=login.password,
                    tls=tls_context(args), prefix=args.prefix) as uplink:
        try:
            drainer = OutboxDrainer(outbox, uplink, args.device, prefix=args.prefix,
                                    rate_per_s=args.rate, window=args.window,
                                    ack_timeout_s=args.ack_timeout)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        print(f"adaptedge edge: draining {len(outbox)} records of {args.outbox} to "
              f"{args.broker}", file=sys.stderr, flush=True)
        done = drainer.drain(args.timeout)
        counters = drainer.counters
    counters["seconds"] = time.monotonic() - started
    if args.json:
        print(json.dumps(counters, indent=2, sort_keys=True))
    else:
        print(f"forwarded {counters['drain_stored']:g} new and {counters['drain_duplicates']:g} "
              f"already stored, {counters['drain_refused']:g} refused, "
              f"{counters['drain_resent']:g} resends, {counters['outbox_records']:g} left "
              f"({counters['seconds']:.2f} s)")
    if not done:
        print(f"adaptedge: error: the outbox is not empty after {args.timeout:g} s (is the cloud "
              "running with --db, and the broker reachable?)", file=sys.stderr)
        return 1
    return 0
