"""``adaptedge export c --bundle B --point P --out DIR``: one operating point of a bundle as a
dependency-free C99 library (``adaptedge_policy.h``/``.c``) for a microcontroller."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("export", help="export a bundle's policy for another target (C)",
                       description=__doc__)
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
