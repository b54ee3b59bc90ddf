"""``adaptedge recalibrate --bundle B (--rows FILE.jsonl | --db URL) --out B2``: re-pick gate
thresholds and the operating point from labelled field rows and write a new bundle.

Escalated rows count once each, audit rows 1/fraction each (they sample the local decisions):
the estimates cover all decisions without the escalated rows' bias (``trainer.recalibrate``).
The new bundle's manifest records its provenance under ``metadata.recalibration``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from adaptedge.cli.db_options import add_option as add_db_password
from adaptedge.cli.db_options import db_password
from adaptedge.cli.errors import CommandError


def register(sub: Any) -> None:
    p = sub.add_parser("recalibrate", help="re-pick gate thresholds from labelled field rows",
                       description=__doc__)
    p.add_argument("--bundle", required=True, type=Path, help="the deployed bundle directory")
    rows = p.add_mutually_exclusive_group(required=True)
    rows.add_argument("--rows", type=Path, help="labelled rows, JSON Lines (LabelledRow fields)")
    rows.add_argument("--db", help="the fleet store's database URL (adaptedge cloud serve --db)")
    add_db_password(p)
    p.add_argument("--out", required=True, type=Path, help="directory of the new bundle")
    p.add_argument("--audit-fraction", type=float, default=None,
                   help="the fraction of local decisions the devices audited (default: "
                   "protocol.audit's default)")
    p.add_argument("--tolerance", type=float, default=None,
                   help="agreement tolerance below the target (default 0.01)")
    p.add_argument("--target", type=float, default=None, help="target agreement with the HPC "
                   "(default: the bundle's validation figure)")
    p.add_argument("--sign-key", type=Path, help="sign the new bundle with this private key")
    p.add_argument("--force", action="store_true", help="replace a bundle at --out")
    p.add_argument("--json", action="store_true", help="print the choice as JSON")
    p.set_defaults(handler=run)


def _rows(args: argparse.Namespace, bundle_id: str) -> list[Any]:
    if args.rows is not None:
        from adaptedge.trainer.fleet_rows_io import read_rows

        return read_rows(args.rows)
    from adaptedge.cloud.fleet.store import FleetStore  # needs the fleet extra (sqlalchemy)

    return list(FleetStore(args.db, password=db_password(args)).labelled_rows(
        bundle_id=bundle_id))


def run(args: argparse.Namespace) -> int:
    from adaptedge.protocol.audit import DEFAULT_AUDIT_FRACTION, AuditPolicy
    from adaptedge.protocol.bundle import verify
    from adaptedge.trainer.recalibrate import DEFAULT_TOLERANCE, recalibrate

    source = verify(args.bundle)
    rows = _rows(args, source.bundle_id)
    fraction = DEFAULT_AUDIT_FRACTION if args.audit_fraction is None else args.audit_fraction
    try:
        result = recalibrate(args.bundle, rows, args.out, audit=AuditPolicy(fraction),
                             tolerance=DEFAULT_TOLERANCE if args.tolerance is None
                             else args.tolerance, target=args.target, force=args.force)
    except ValueError as exc:  # a bad --audit-fraction or --tolerance (recalibrate's own: main)
        raise CommandError(str(exc)) from None
    if args.sign_key is not None:
        from adaptedge.protocol.bundle_signing import sign_bundle

        sign_bundle(args.out, args.sign_key)
    chosen = result.chosen
    if args.json:
        print(json.dumps({"bundle_id": result.manifest.bundle_id, "chosen": asdict(chosen),
                          "target_agreement": result.target,
                          "n_effective": result.n_effective,
                          "rows": result.manifest.metadata["recalibration"]["rows"]}, indent=2))
    else:
        print(f"wrote bundle {result.manifest.bundle_id} to {args.out}: default point "
              f"{chosen.name} (estimated agreement with the HPC {chosen.agreement:.4f}, "
              f"escalation {chosen.escalation_rate:.3f}, cost {chosen.cost:.4g}; target "
              f"{result.target:.4f}, {result.n_effective:.0f} effective rows)")
    return 0
