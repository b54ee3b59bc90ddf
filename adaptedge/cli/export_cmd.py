"""``adaptedge export c --bundle B --point P --out DIR``: one operating point of a bundle as a
dependency-free C99 library (``adaptedge_policy.h``/``.c``) for a microcontroller.

``adaptedge export device --bundle B [--points P1,P2] --out D``: the device bundle of B (what a
device runs and downloads: the chosen points' policies, no HPC; ``protocol.device_bundle``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("export", help="export a bundle's policy for another target (C) or its "
                       "device part", description=__doc__)
    targets = p.add_subparsers(dest="target", metavar="TARGET", required=True)
    c = targets.add_parser("c", help="a C99 library: no heap, no I/O, sensors via a callback",
                           description=__doc__)
    c.add_argument("--bundle", required=True, type=Path, help="bundle directory or .tar")
    c.add_argument("--point", help="operating point (default: the bundle's default)")
    c.add_argument("--out", required=True, type=Path, help="directory to write into")
    c.add_argument("--flash-limit", type=_bytes, metavar="SIZE",
                   help="refuse a point whose estimated Cortex-M0+ flash exceeds SIZE (e.g. "
                   "256K), naming the most accurate point that fits")
    c.set_defaults(handler=run_c)
    d = targets.add_parser("device", help="a device bundle: the chosen points, no HPC",
                           description=__doc__)
    d.add_argument("--bundle", required=True, type=Path, help="bundle directory or .tar")
    d.add_argument("--points", help="comma-separated operating points to keep (default: all); "
                   "the bundle's default stays the default if kept, else the first given is")
    d.add_argument("--out", required=True, type=Path, help="device bundle directory to write")
    d.add_argument("--key", type=Path, help="sign the device bundle with this private key")
    d.add_argument("--force", action="store_true", help="replace the bundle already in --out")
    d.set_defaults(handler=run_device)


def _bytes(text: str) -> int:
    """``262144``, ``256K`` or ``1M`` as bytes."""
    scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:].upper(), 1)
    try:
        return int(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 262144, 256K)") from None


def run_c(args: argparse.Namespace) -> int:
    from adaptedge.trainer.export.c import export_c

    lib = export_c(args.bundle, args.out, args.point, args.flash_limit)
    libm = "; uses expf: link with -lm" if lib.uses_expf else ""
    print(f"wrote {lib.header} and {lib.source}: point {lib.point!r} (about "
          f"{lib.flash_estimate / 1024:.0f} KB of flash on a Cortex-M0+{libm})")
    return 0


def bundle_bytes(root: Path) -> int:
    """The bytes of a bundle directory's files (manifest and signature included)."""
    return sum(p.stat().st_size for p in root.iterdir() if p.is_file())


def run_device(args: argparse.Namespace) -> int:
    from adaptedge.protocol.bundle import check_target, open_bundle, verify
    from adaptedge.protocol.device_bundle import write_device_bundle

    if args.key is not None:
        from adaptedge.protocol.signing import load_signing_key

        load_signing_key(args.key)  # a bad key refuses before anything is written
    points = None if args.points is None else [p.strip() for p in args.points.split(",")
                                               if p.strip()]
    check_target(args.out, force=args.force)
    with open_bundle(args.bundle) as root:
        full = verify(root)
        device = write_device_bundle(root, full, args.out, points, force=args.force)
        full_bytes = bundle_bytes(Path(root))
    signed = ""
    if args.key is not None:
        from adaptedge.protocol.bundle_signing import sign_bundle

        signed = f", signed with key {sign_bundle(args.out, args.key).key_id}"
    print(f"wrote device bundle {device.bundle_id} to {args.out}: "
          f"{len(device.operating_points)} point(s), default "
          f"{device.default_operating_point!r}, {bundle_bytes(args.out)} bytes (the bundle it "
          f"was cut from: {full_bytes}){signed}; the cloud answers it with HPC "
          f"{device.hpc.cloud_bundle}/{device.hpc.file}")
    return 0
