"""``adaptedge keys new --out DIR``: a key pair for signing bundles (``adaptedge sign``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("keys", help="make an Ed25519 key pair for signing bundles")
    cmds = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    new = cmds.add_parser("new", help="write signing.key (0600) and signing.pub into DIR",
                          description=__doc__)
    new.add_argument("--out", required=True, type=Path,
                     help="directory for the keys (created 0700; existing keys are kept)")
    new.set_defaults(handler=run_new)


def run_new(args: argparse.Namespace) -> int:
    from adaptedge.protocol.signing import load_trust_key, write_keypair

    private, public = write_keypair(args.out)
    key_id = load_trust_key(public).key_id
    print(f"wrote {private} (private, 0600: keep it off devices) and {public} (key {key_id})")
    print(f"sign:  adaptedge sign BUNDLE --key {private}")
    print(f"trust: adaptedge edge run --trust {public} ...  (also inspect, cloud serve)")
    return 0
