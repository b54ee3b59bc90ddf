"""A bundle's names and digests: the manifest and signature file names, a file's SHA-256, and
the manifest's SHA-256 (what a signature covers) whose first 24 hex are the bundle id."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
SIGNATURE_NAME = "signature.json"
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_sha256(body: Mapping[str, Any]) -> str:
    """SHA-256 (64 hex) of the canonical manifest without its id: what a signature covers."""
    content = {k: v for k, v in body.items() if k != "bundle_id"}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def manifest_digest(body: Mapping[str, Any]) -> str:
    """The bundle id: SHA-256 (first 24 hex) of the canonical manifest without its id."""
    return manifest_sha256(body)[:24]
