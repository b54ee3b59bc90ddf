"""Signing a bundle on disk: verify it, then write its ``signature.json`` (``protocol.signing``
holds the keys and the signature format; ``protocol.bundle`` checks signatures on verify)."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from adaptedge.protocol.bundle import verify
from adaptedge.protocol.bundle_digest import SIGNATURE_NAME, manifest_sha256
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.signing import TrustKey, load_signing_key, write_signature


def sign_bundle(bundle_dir: str | os.PathLike[str], key_path: str | os.PathLike[str]) -> TrustKey:
    """Verify the bundle, then write its ``signature.json`` (replacing one); returns the signer."""
    root = Path(bundle_dir)
    if not root.is_dir():
        raise BundleError("is not a bundle directory: unpack a .tar bundle, sign the "
                          "directory, then pack it again", path=str(root))
    key = load_signing_key(key_path)
    (root / SIGNATURE_NAME).unlink(missing_ok=True)  # re-signing: the old one may be stale
    manifest = verify(root)
    write_signature(root, key, manifest.bundle_id, manifest_sha256(manifest.to_dict()))
    public = key.public_key().public_bytes(serialization.Encoding.Raw,
                                           serialization.PublicFormat.Raw)
    return TrustKey(public, str(key_path))
