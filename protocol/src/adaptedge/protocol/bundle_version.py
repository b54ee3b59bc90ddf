"""A bundle's version: an integer in its manifest's ``metadata.bundle_version``.

The version lives in the manifest, so it is covered by the bundle id and by a signature: a
device that only ever moves to a higher version cannot be downgraded by anyone who lacks the
signing key. A bundle without one has version 0. ``stamp_version`` writes a version into a
bundle directory; the bundle id changes with it and any signature is removed (sign it again).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from adaptedge.protocol.bundle import verify
from adaptedge.protocol.bundle_digest import MANIFEST_NAME, SIGNATURE_NAME, manifest_digest
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import Manifest

VERSION_KEY = "bundle_version"
MAX_VERSION = (1 << 63) - 1


def bundle_version(manifest: Manifest | dict[str, Any]) -> int:
    """The version of a manifest (0 when it has none); ``BundleError`` when it is not an int."""
    meta = manifest.metadata if isinstance(manifest, Manifest) else manifest.get("metadata", {})
    value = meta.get(VERSION_KEY, 0) if isinstance(meta, dict) else 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_VERSION:
        raise BundleError(f"must be an integer in 0..2**63-1, not {value!r}",
                          path=f"metadata.{VERSION_KEY}")
    return value


def stamp_version(bundle_dir: str | os.PathLike[str], version: int) -> Manifest:
    """Set the version of a (verified) bundle directory; returns the new manifest. The bundle id
    changes and ``signature.json`` is removed: sign the bundle afterwards."""
    if isinstance(version, bool) or not 0 <= version <= MAX_VERSION:
        raise BundleError(f"a bundle version must be an integer in 0..2**63-1, not {version}")
    root = Path(bundle_dir)
    manifest = verify(root)
    body = manifest.to_dict()
    body["metadata"] = {**dict(manifest.metadata), VERSION_KEY: int(version)}
    body["bundle_id"] = manifest_digest(body)
    Manifest.from_dict(body)  # still a valid manifest
    (root / SIGNATURE_NAME).unlink(missing_ok=True)  # it signed the old id
    tmp = root / f".{MANIFEST_NAME}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, root / MANIFEST_NAME)
    return verify(root)
