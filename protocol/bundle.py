"""Bundles on disk: write a directory with a hashed manifest, verify one before anything runs.

``verify`` refuses any changed, missing or extra byte in a listed file, any file the manifest
does not list, and any edit to the manifest itself (the bundle id is the SHA-256 of the
canonical manifest body).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import Manifest

MANIFEST_NAME = "manifest.json"
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_digest(body: Mapping[str, Any]) -> str:
    """The bundle id: SHA-256 (first 24 hex) of the canonical manifest without its id."""
    content = {k: v for k, v in body.items() if k != "bundle_id"}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def write_bundle(out_dir: str | os.PathLike[str], manifest: Manifest,
                 files: Mapping[str, bytes | Path]) -> Manifest:
    """Write model files and a manifest whose ``files`` hashes and ``bundle_id`` are filled in.

    ``files`` maps bundle file names to their bytes or to a path to copy. The directory is
    built beside the target and renamed into place, so a failure leaves no half bundle.
    """
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        hashes: dict[str, str] = {}
        for name, content in sorted(files.items()):
            target = staging / name
            if isinstance(content, bytes | bytearray):
                target.write_bytes(content)
            else:
                shutil.copyfile(content, target)
            hashes[name] = sha256_file(target)
        draft = replace(manifest, files=hashes, bundle_id="pending")
        body = draft.to_dict()
        body["bundle_id"] = manifest_digest(body)
        final = Manifest.from_dict(body)  # validates cross-references against real files
        (staging / MANIFEST_NAME).write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
        return final
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def read_manifest(bundle_dir: str | os.PathLike[str]) -> Manifest:
    """Parse and validate ``manifest.json`` (no file hashes checked: use ``verify``)."""
    path = Path(bundle_dir) / MANIFEST_NAME
    if not Path(bundle_dir).is_dir():
        raise BundleError("is not a bundle directory (or .tar of one)", path=str(bundle_dir))
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError("is missing: not a bundle directory", path=str(path)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"is not valid JSON ({exc})", path=str(path)) from exc
    manifest = Manifest.from_dict(raw)
    if manifest_digest(raw) != manifest.bundle_id:
        raise BundleError(
            "was edited after export (its content no longer matches bundle_id "
            f"{manifest.bundle_id}): re-export the bundle", path=str(path))
    return manifest


def verify(bundle_dir: str | os.PathLike[str]) -> Manifest:
    """Validate the manifest and the SHA-256 of every listed file; refuse unlisted files."""
    root = Path(bundle_dir)
    manifest = read_manifest(root)
    present = {p.name for p in root.iterdir()} - {MANIFEST_NAME}
    for name, expected in sorted(manifest.files.items()):
        path = root / name
        if name not in present or not path.is_file():
            raise BundleError("is listed in the manifest but missing from the bundle", path=str(path))
        if sha256_file(path) != expected:
            raise BundleError("does not match its SHA-256 in the manifest: the bundle was "
                              "modified or corrupted; re-export or re-download it", path=str(path))
    extra = sorted(present - set(manifest.files))
    if extra:
        raise BundleError("is not listed in the manifest: remove it or re-export the bundle",
                          path=str(root / extra[0]))
    return manifest


@contextmanager
def open_bundle(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a directory for a bundle given as a directory or a ``.tar`` of one (extracted safely)."""
    p = Path(path)
    if p.is_dir():
        yield p
        return
    if not p.is_file() or not tarfile.is_tarfile(p):
        raise BundleError("is neither a bundle directory nor a .tar of one", path=str(p))
    with tempfile.TemporaryDirectory(prefix="adaptedge-bundle-") as tmp:
        with tarfile.open(p) as tar:
            tar.extractall(tmp, filter="data")
        entries = [e for e in Path(tmp).iterdir()]
        root = entries[0] if len(entries) == 1 and entries[0].is_dir() else Path(tmp)
        yield root
