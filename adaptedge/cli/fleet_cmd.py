"""``adaptedge fleet``: the fleet seen from the command line.

``fleet status --db URL [--json]`` prints one line (or JSON object) per device: records
stored, audits and the audited agreement with the HPC, escalation rate, alarms, records refused
over the device's row quota.
``fleet report --db URL --out DIR [--bundle B]`` writes ``fleet.md`` and PNGs of agreement and
escalation rate over time against the bundle's validation expectation (``cloud.fleet_view``).
``fleet deploy`` / ``rollout-status``: over-the-air rollouts (``fleet_rollout``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from adaptedge.cli.db_options import add_option as add_db_password
from adaptedge.cli.db_options import db_password
from adaptedge.cli.fleet_rollout import register_rollout


def register(sub: Any) -> None:
    p = sub.add_parser("fleet", help="manage a fleet of devices: stored records, audits and "
                       "alarms; over-the-air rollouts")
    cmds = p.add_subparsers(dest="fleet_command", metavar="ACTION", required=True)
    s = cmds.add_parser("status", help="one line per device: records, audits, agreement, "
                        "escalation rate, alarms, records refused over quota")
    s.add_argument("--db", required=True, help="the database of cloud serve --db")
    add_db_password(s)
    s.add_argument("--json", action="store_true", help="print a JSON list, one object per "
                   "device")
    s.set_defaults(handler=status)
    r = cmds.add_parser("report", help="Markdown + PNGs of agreement and escalation rate over "
                        "time against the bundle's validation expectation")
    r.add_argument("--db", required=True, help="the database of cloud serve --db")
    add_db_password(r)
    r.add_argument("--out", required=True, type=Path, help="output folder")
    r.add_argument("--bundle", help="the bundle the devices run (its validation figures are "
                   "the expectation; without it no expectation is drawn)")
    r.add_argument("--window", type=int, default=50, metavar="N",
                   help="audits per agreement estimate (default 50)")
    r.set_defaults(handler=report)
    register_rollout(cmds)


def _open(args: argparse.Namespace) -> Any:
    from sqlalchemy import make_url

    from adaptedge.cli.errors import CommandError
    from adaptedge.cloud.fleet.store import FleetStore, database_url

    url, password = args.db, db_password(args)
    parsed = make_url(database_url(url))
    if parsed.get_backend_name() == "sqlite" and parsed.database and \
            not Path(parsed.database).is_file():
        raise CommandError(f"there is no fleet store at {parsed.database} (cloud serve --db "
                           "creates it): check --db")
    return FleetStore(url, password=password)


def _fmt(value: Any, spec: str = ".3f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec)


def status(args: argparse.Namespace) -> int:
    from adaptedge.cloud.fleet.view import device_status

    with _open(args) as store:
        rows = device_status(store)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no devices in the store yet")
        return 0
    header = (f"{'device':<20} {'records':>8} {'audits':>7} {'agreement (95%)':>22} "
              f"{'escalation':>10} {'backlog':>7} {'alarms':>6} {'refused':>7}")
    print(header)
    for r in rows:
        band = "" if r["agreement"] is None else \
            f" [{r['agreement_low']:.2f}, {r['agreement_high']:.2f}]"
        print(f"{r['device']:<20} {r['records_stored']:>8} {r['audits']:>7} "
              f"{_fmt(r['agreement']) + band:>22} {_fmt(r['escalation_rate']):>10} "
              f"{_fmt(r['outbox_records'], '.0f'):>7} {r['alarms']:>6} "
              f"{r['quota_refused']:>7}")
    for r in rows:  # a regression device's audits: its values against the HPC's
        if "audit_mse" in r:
            print(f"{r['device']}: audited values vs the HPC's: MSE {r['audit_mse']:.4g}, "
                  f"MAE {r['audit_mae']:.4g} (the target's unit) over {r['audits_valued']} "
                  "audits")
    return 0


def report(args: argparse.Namespace) -> int:
    from adaptedge.cli.errors import CommandError
    from adaptedge.cli.fleet_report import write_report

    if args.window < 1:
        raise CommandError(f"--window must be >= 1, got {args.window}")
    manifest = None
    if args.bundle:
        from adaptedge.protocol.bundle import open_bundle, verify

        with open_bundle(args.bundle) as root:
            manifest = verify(root)
    with _open(args) as store:
        path = write_report(store, args.out, manifest, args.window)
    print(f"wrote {path} and its plots")
    return 0
