"""``adaptedge recalibrate --bundle B (--rows FILE.jsonl | --db URL) --out B2``: re-pick gate
thresholds and the operating point from labelled field rows and write a new bundle.

Escalated rows count once each, audit rows 1/fraction each (they sample the local decisions):
the estimates cover all decisions without the escalated rows' bias (``trainer.recalibrate``).
Each row carries the audit fraction its device used; ``--audit-fraction`` is needed only for
rows stored before devices sent it (it never overrides a stored fraction). No device weighs
more than ``--max-device-share`` of the rows. The new bundle's manifest records its provenance
under ``metadata.recalibration``.
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
                   help="the fraction of local decisions the devices audited, for rows that do "
                   "not carry theirs (stored by an older adaptedge); rows that carry one keep it")
    p.add_argument("--max-device-share", type=float, default=None, metavar="S",
                   help="no device weighs more than this share of the weighted rows (default "
                   "0.25; with fewer than 1/S devices, 1/devices; 1: no cap)")
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

    with FleetStore(args.db, quota=None, password=db_password(args)) as store:
        return list(store.labelled_rows(bundle_id=bundle_id))


def run(args: argparse.Namespace) -> int:
    from adaptedge.protocol.audit import AuditPolicy
    from adaptedge.protocol.bundle import verify
    from adaptedge.trainer.recalibrate import (
        DEFAULT_MAX_DEVICE_SHARE,
        DEFAULT_TOLERANCE,
        recalibrate,
    )

    share = DEFAULT_MAX_DEVICE_SHARE if args.max_device_share is None else args.max_device_share
    if not 0.0 < share <= 1.0:
        raise CommandError(f"--max-device-share must be in (0, 1], got {share}")
    source = verify(args.bundle)
    if source.is_regression:  # its stored rows carry values, not the labels a gate agrees on
        raise CommandError(f"bundle {source.bundle_id} is a regression bundle: recalibrate "
                           "re-picks a classification gate from stored labels and does not "
                           "take regression rows yet (issue 33); retrain it with adaptedge "
                           "train --task regression")
    rows = _rows(args, source.bundle_id)
    try:
        audit = None if args.audit_fraction is None else AuditPolicy(args.audit_fraction)
        result = recalibrate(args.bundle, rows, args.out, audit=audit,
                             tolerance=DEFAULT_TOLERANCE if args.tolerance is None
                             else args.tolerance, target=args.target, force=args.force,
                             max_device_share=share)
    except ValueError as exc:  # a bad --audit-fraction or --tolerance (recalibrate's own: main)
        raise CommandError(str(exc)) from None
    if args.sign_key is not None:
        from adaptedge.protocol.bundle_signing import sign_bundle

        sign_bundle(args.out, args.sign_key)
    chosen = result.chosen
    prov = result.manifest.metadata["recalibration"]
    if args.json:
        print(json.dumps({"bundle_id": result.manifest.bundle_id, "chosen": asdict(chosen),
                          "target_agreement": result.target,
                          "n_effective": result.n_effective, "rows": prov["rows"],
                          "audit_fractions": prov["audit_fractions"],
                          "devices": prov["devices"]}, indent=2))
    else:
        fractions = prov["audit_fractions"]
        print(f"wrote bundle {result.manifest.bundle_id} to {args.out}: default point "
              f"{chosen.name} (estimated agreement with the HPC {chosen.agreement:.4f}, "
              f"escalation {chosen.escalation_rate:.3f}, cost {chosen.cost:.4g}; target "
              f"{result.target:.4f}, {result.n_effective:.0f} effective rows; audit fractions: "
              f"{fractions['stored']} rows their own, {fractions['assumed']} --audit-fraction)")
    return 0
