"""``adaptedge fleet deploy`` and ``adaptedge fleet rollout-status``: over-the-air rollouts.

``deploy`` announces a signed bundle to chosen devices (retained, per device; a full bundle
travels as its device part, without the HPC, unless ``--full``) and, with
``--serve``, serves its chunks until every chosen device is active on it, refused it or rolled
it back (or ``--timeout``). ``rollout-status`` prints each device's state from the retained
announcements and statuses on the broker.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def register_rollout(fleet_sub: Any) -> None:
    d = fleet_sub.add_parser("deploy", help="announce a signed bundle to devices and serve it "
                             "over MQTT (canaries, probation, automatic rollback)")
    d.add_argument("--bundle", required=True, type=Path, help="bundle directory or .tar")
    who = d.add_mutually_exclusive_group(required=True)
    who.add_argument("--devices", help="comma-separated device ids")
    who.add_argument("--fraction", type=float, help="a share (0..1] of the fleet: --fleet, "
                     "else the devices heard on telemetry within --discover-s")
    d.add_argument("--fleet", help="comma-separated ids of the whole fleet (with --fraction)")
    d.add_argument("--discover-s", type=float, default=3.0, metavar="S",
                   help="listen S seconds for devices' telemetry to find the fleet (default 3)")
    d.add_argument("--rollout", help="rollout name (default: r<unix time>); also picks which "
                   "devices a --fraction takes")
    d.add_argument("--url", default="", help="file:// or http(s):// URL the devices download "
                   "the bundle .tar from (default: chunks over MQTT)")
    d.add_argument("--serve", action="store_true", help="serve the chunks and wait until the "
                   "devices settle (else a running `cloud serve --serve-updates` must)")
    d.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="with --serve: stop waiting after S seconds (default 600)")
    d.add_argument("--chunk-size", type=int, default=64 << 10, metavar="BYTES")
    d.add_argument("--probation-decisions", type=int, default=200, metavar="N")
    d.add_argument("--min-decisions", type=int, default=20, metavar="N")
    d.add_argument("--max-degraded-rate", type=float, default=0.2, metavar="R",
                   help="roll back when more than this share of the first decisions degrade")
    d.add_argument("--full", action="store_true", help="ship the whole bundle, HPC included "
                   "(devices whose adaptedge predates device bundles); by default a full "
                   "bundle ships as its device part (an unsigned one only: a signed bundle's "
                   "device part is cut and signed with `adaptedge export device --key`)")
    d.add_argument("--xz", action="store_true", help="send the image xz-compressed (.tar.xz: "
                   "a device bundle's points share most trees, so it shrinks many times; the "
                   "device needs ~65 MiB to unpack it and an adaptedge that reads .tar.xz)")
    d.add_argument("--trust", action="append", type=Path, metavar="PUBKEY",
                   help="refuse to announce a bundle not signed by this key (repeatable)")
    d.add_argument("--work-dir", type=Path, help="where a bundle directory is packed (default: "
                   "a temporary folder)")
    _broker_options(d)
    d.set_defaults(handler=deploy)

    s = fleet_sub.add_parser("rollout-status", help="per device: announced, downloading, "
                             "active, rolled back or refused (with the reason)")
    s.add_argument("--bundle-id", help="only devices announced this bundle")
    s.add_argument("--wait-s", type=float, default=1.0, metavar="S",
                   help="collect retained messages for S seconds (default 1)")
    s.add_argument("--json", action="store_true", help="print JSON rows")
    _broker_options(s)
    s.set_defaults(handler=rollout_status)


def _broker_options(p: Any) -> None:
    p.add_argument("--broker", required=True, help="mqtt://HOST:PORT or mqtts://HOST:PORT")
    p.add_argument("--username", help="broker user name (a cloud service account)")
    p.add_argument("--password-file", type=Path, help="file holding the broker password")
    p.add_argument("--prefix", default="adaptedge", help="topic prefix (default adaptedge)")


def _client(args: argparse.Namespace, role: str, watch: Any) -> Any:
    """A connected client running in its own thread, ``watch`` attached (on every connect)."""
    from adaptedge.cli.broker import resolve_broker
    from adaptedge.cloud.rollout.announce import start_threaded
    from adaptedge.cloud.transport.connection import make_client, parse_broker_url

    login = resolve_broker(args.broker, username=args.username, password_file=args.password_file)
    address = parse_broker_url(login.url)
    client = make_client(f"adaptedge-{role}-{time.time_ns() % 10**9}", username=login.username,
                         password=login.password, use_tls=address.tls)
    client.on_connect = lambda c, u, f, reason, p: watch.attach(c)
    start_threaded(client, address)
    return client, login


def choose_devices(fleet: list[str], fraction: float, rollout: str) -> list[str]:
    """``ceil(fraction * len(fleet))`` devices (at least one), picked by a hash of the rollout
    name and the device id: the same name picks the same devices, another name others."""
    ranked = sorted(set(fleet), key=lambda d: hashlib.sha256(f"{rollout}/{d}".encode()).digest())
    return sorted(ranked[: max(1, math.ceil(fraction * len(ranked)))])


def _targets(args: argparse.Namespace, watch: Any, rollout: str) -> list[str]:
    from adaptedge.cli.errors import CommandError

    if args.devices is not None:
        devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    else:
        if not 0 < args.fraction <= 1:
            raise CommandError(f"--fraction must be in (0, 1], got {args.fraction}")
        if args.fleet:
            fleet = [d.strip() for d in args.fleet.split(",") if d.strip()]
        else:
            time.sleep(max(0.0, args.discover_s))
            fleet = [row["device"] for row in watch.rows()]
        if not fleet:
            raise CommandError("no device found: pass --fleet or --devices (no device sent "
                               f"telemetry within --discover-s {args.discover_s:g})")
        devices = choose_devices(fleet, args.fraction, rollout)
    if not devices:
        raise CommandError("--devices names no device")
    return devices


def deploy(args: argparse.Namespace) -> int:
    from adaptedge.cli.errors import CommandError
    from adaptedge.cloud.rollout.announce import ChunkServer, announce, announcement, build_image
    from adaptedge.cloud.rollout.status import RolloutWatch, render

    if not 0 <= args.max_degraded_rate <= 1 or args.probation_decisions < 0 \
            or args.min_decisions < 0:
        raise CommandError("--max-degraded-rate must be in [0, 1]; --probation-decisions and "
                           "--min-decisions >= 0")
    rollout = args.rollout or f"r{int(time.time())}"
    with tempfile.TemporaryDirectory(prefix="adaptedge-deploy-") as tmp:
        image = build_image(args.bundle, args.work_dir or tmp, chunk_size=args.chunk_size,
                            trust=args.trust, device_only=not args.full, xz=args.xz)
        watch = RolloutWatch(args.prefix)
        client, login = _client(args, "deploy", watch)
        server = None
        try:
            devices = _targets(args, watch, rollout)
            if args.serve:
                server = ChunkServer(login.url, prefix=args.prefix, username=login.username,
                                     password=login.password)
                server.add(image)
                server.start()
            announce(client, devices, announcement(
                image, rollout=rollout, url=args.url,
                probation_decisions=args.probation_decisions,
                min_decisions=args.min_decisions, max_degraded_rate=args.max_degraded_rate),
                prefix=args.prefix)
            print(f"announced bundle {image.bundle_id} (version {image.version}, {image.size} "
                  f"bytes, {len(image.chunk_hashes)} chunks) to {len(devices)} device(s): "
                  f"{', '.join(devices)} (rollout {rollout})", file=sys.stderr, flush=True)
            if server is None:
                return 0
            settled = watch.wait_settled(devices, image.bundle_id, args.timeout)
            rows = [r for r in watch.rows() if r["device"] in devices]
            print(render(rows))
            if not settled:
                print(f"adaptedge: warning: not every device settled within {args.timeout:g} s",
                      file=sys.stderr)
                return 1
            return 0 if all(r["state"] == "active" for r in rows) else 2
        finally:
            if server is not None:
                server.stop()
            client.disconnect()
            client.loop_stop()


def rollout_status(args: argparse.Namespace) -> int:
    from adaptedge.cloud.rollout.status import RolloutWatch, render

    watch = RolloutWatch(args.prefix)
    client, _ = _client(args, "status", watch)
    try:
        time.sleep(max(0.0, args.wait_s))
    finally:
        client.disconnect()
        client.loop_stop()
    rows = watch.rows(args.bundle_id)
    print(json.dumps(rows, indent=2) if args.json else render(rows))
    return 0
