"""``adaptedge sign BUNDLE --key signing.key``: verify a bundle, then sign its id (Ed25519).

The signature goes into BUNDLE/signature.json; it is not part of the hashes, so the bundle id
does not change. Loaders given ``--trust signing.pub`` accept only bundles signed this way.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("sign", help="sign a bundle directory with an Ed25519 key",
                       description=__doc__)
    p.add_argument("bundle", type=Path, help="bundle directory")
    p.add_argument("--key", required=True, type=Path,
                   help="private key (signing.key from `adaptedge keys new`)")
    p.add_argument("--bundle-version", type=int, metavar="N",
                   help="first set the bundle's version to N (devices following updates only "
                   "move to higher versions); the bundle id changes")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from adaptedge.protocol.bundle import read_manifest
    from adaptedge.protocol.bundle_digest import SIGNATURE_NAME
    from adaptedge.protocol.bundle_signing import sign_bundle
    from adaptedge.protocol.signing import load_signing_key

    if args.bundle_version is not None:
        from adaptedge.protocol.bundle_version import stamp_version

        load_signing_key(args.key)  # a bad key refuses before the bundle changes
        stamp_version(args.bundle, args.bundle_version)
    signer = sign_bundle(args.bundle, args.key)
    bundle_id = read_manifest(args.bundle).bundle_id
    print(f"signed bundle {bundle_id} with key {signer.key_id}: wrote "
          f"{args.bundle / SIGNATURE_NAME}")
    return 0
