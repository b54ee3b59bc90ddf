"""``edge run --follow-updates``: the options and the wiring of ``edge.updates`` into a run.

Kept out of ``edge_cmd`` (which only calls ``add_update_options`` and ``follow_updates``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_update_options(run: Any) -> None:
    run.add_argument("--follow-updates", action="store_true",
                     help="take signed bundle updates announced over MQTT while running "
                     "(needs --broker and --trust): verify, swap between decisions, probation, "
                     "automatic rollback")
    run.add_argument("--updates-dir", type=Path, metavar="DIR",
                     help="where updates are downloaded and kept (default: "
                     "./adaptedge-updates/<device>)")


def follow_updates(args: argparse.Namespace, rt: Any, uplink: Any) -> Any:
    """``rt`` as is, or with ``--follow-updates`` a ``SwitchableRuntime`` around it whose
    ``UpdateFollower`` runs until the runtime is closed."""
    if not getattr(args, "follow_updates", False):
        return rt
    from adaptedge.cli.edge_drain import audit_policy
    from adaptedge.cli.main import CommandError
    from adaptedge.edge import EdgeRuntime, OperatingPointError, Outbox
    from adaptedge.edge.bundle_slots import BundleSlots
    from adaptedge.edge.switchable import SwitchableRuntime
    from adaptedge.edge.updates import UpdateFollower
    from adaptedge.protocol.bundle_version import bundle_version

    if uplink is None or not args.trust:
        rt.close()
        raise CommandError("--follow-updates needs --broker (updates come over MQTT) and "
                           "--trust PUBKEY (only signed bundles are taken)")
    timeouts = None if args.sensor_timeout is None else {"*": args.sensor_timeout}
    outbox = rt.outbox if isinstance(rt.outbox, Outbox) else None
    audit = audit_policy(args)  # edge.audit, as for --bundle
    wanted = args.operating_point if args.budget is None else args.budget

    def load(root: Path) -> Any:
        try:
            return EdgeRuntime.load(root, uplink=uplink, device_id=args.device, trust=args.trust,
                                    operating_point=wanted, sensor_timeouts_ms=timeouts,
                                    outbox=outbox, audit=audit)
        except OperatingPointError:  # the new bundle has no such point: its default then
            return EdgeRuntime.load(root, uplink=uplink, device_id=args.device,
                                    trust=args.trust, sensor_timeouts_ms=timeouts, outbox=outbox,
                                    audit=audit)

    slots = BundleSlots(args.updates_dir or Path("adaptedge-updates") / args.device)
    rt = _resume_active(rt, slots, load)
    holder = SwitchableRuntime(rt, bundle_version(rt.manifest))
    follower = UpdateFollower(holder, uplink, slots, trust=args.trust, load=load,
                              prefix=args.prefix).start()
    holder.on_close.append(follower.close)
    return holder


def _resume_active(rt: Any, slots: Any, load: Any) -> Any:
    """After a restart: the bundle an update made active, when it is newer than ``--bundle``,
    loads and verifies, and reads the same sensors; else ``rt``."""
    from adaptedge.protocol.bundle_version import bundle_version

    active = str(slots.state.get("active") or "")
    if not active or active == rt.manifest.bundle_id:
        return rt
    try:
        root = slots.bundle_path(active)
        new = load(root) if root.is_dir() else None
    except Exception as exc:  # a broken leftover: stay on --bundle
        print(f"adaptedge edge: warning: cannot resume on updated bundle {active}: {exc}",
              file=sys.stderr)
        return rt
    if new is None:
        return rt
    if bundle_version(new.manifest) <= bundle_version(rt.manifest) or \
            new.manifest.feature_names != rt.manifest.feature_names:
        new.close()
        return rt
    print(f"adaptedge edge: resuming on bundle {active} (version "
          f"{bundle_version(new.manifest)}), taken over the air before the restart",
          file=sys.stderr, flush=True)
    rt.close()
    return new
