"""Bundles on disk: write a directory with a hashed manifest, verify one before anything runs.

``verify`` refuses any changed, missing or extra byte in a listed file, any file the manifest
does not list, and any edit to the manifest itself (the bundle id is the SHA-256 of the
canonical manifest body). An optional ``signature.json`` (see ``protocol.signing``) is the one
file outside the hashes; with ``trust`` keys, ``verify`` requires it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptedge.protocol.archive import DEFAULT_LIMITS, ArchiveLimits, extract_tar
from adaptedge.protocol.bundle_digest import (
    MANIFEST_NAME,
    SIGNATURE_NAME,
    manifest_digest,
    sha256_file,
)
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.strict_json import loads_strict

if TYPE_CHECKING:
    from adaptedge.protocol.signing import TrustKey

MAX_MANIFEST_BYTES = 64 << 20
REPLACE_HINT = "use an empty or new directory, or --force to replace a bundle"


def _holds_a_bundle(path: Path, entries: Sequence[Path]) -> bool:
    """Whether ``path`` looks like a bundle: a manifest and only the files it lists."""
    manifest = path / MANIFEST_NAME
    if manifest.is_symlink() or not manifest.is_file():
        return False
    try:
        raw = json.loads(manifest.read_text(encoding="utf-8"))
        listed = set(raw["files"]) | {MANIFEST_NAME, SIGNATURE_NAME}
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return False
    return all(e.name in listed and e.is_file() and not e.is_symlink() for e in entries)


def check_target(out_dir: str | os.PathLike[str], *, force: bool = False) -> Path:
    """The absolute output path, if a bundle may be written there; else BundleError.

    A new path or an empty directory is fine; an existing bundle only with ``force``;
    anything else (a file, a link, a folder holding other things) never.
    """
    out = Path(os.path.abspath(out_dir))
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise BundleError(f"exists and is not a directory: {REPLACE_HINT}", path=str(out))
    _check_writable(out.parent)
    if not out.exists():
        return out
    entries = list(out.iterdir())
    if entries and not _holds_a_bundle(out, entries):
        raise BundleError(f"holds {len(entries)} entries and is not a bundle, so it is left "
                          f"alone: {REPLACE_HINT}", path=str(out))
    if entries and not force:
        raise BundleError(f"already holds a bundle: {REPLACE_HINT}", path=str(out))
    return out


def _check_writable(folder: Path) -> None:
    """BundleError unless a folder can be made in ``folder`` (or, if it does not exist yet,
    in its nearest existing parent): the bundle is staged there, and this is known before
    anything is trained or written."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".adaptedge-probe-", dir=existing))
    except OSError as exc:
        raise BundleError(f"cannot write a bundle here ({exc.strerror}): choose a folder you "
                          "can write to", path=str(existing)) from None


def _move_into_place(staging: Path, out: Path, force: bool) -> None:
    check_target(out, force=force)  # again: the folder may have changed while we wrote
    if not out.exists() or not any(out.iterdir()):
        staging.rename(out)  # rename(2) replaces an empty directory in one step
        return
    old = out.parent / f".{out.name}.replaced-{secrets.token_hex(4)}"
    out.rename(old)
    try:
        staging.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old)


def write_bundle(out_dir: str | os.PathLike[str], manifest: Manifest,
                 files: Mapping[str, bytes | Path], *, force: bool = False) -> Manifest:
    """Write model files and a manifest whose ``files`` hashes and ``bundle_id`` are filled in.

    ``files`` maps bundle file names to their bytes or to a path to copy. The bundle is built
    in a hidden sibling and renamed into place, so a failure leaves the target as it was.
    ``out_dir`` must be new, an empty directory, or (with ``force``) an existing bundle.
    """
    out = check_target(out_dir, force=force)
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
        _move_into_place(staging, out, force)
        return final
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def read_manifest_body(bundle_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed (not yet validated) ``manifest.json`` of a bundle directory."""
    path = Path(bundle_dir) / MANIFEST_NAME
    if not Path(bundle_dir).is_dir():
        raise BundleError("is not a bundle directory (or .tar of one)", path=str(bundle_dir))
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise BundleError("is missing: not a bundle directory", path=str(path)) from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise BundleError(f"is larger than {MAX_MANIFEST_BYTES} bytes", path=str(path))
    try:
        raw = loads_strict(data)
    except BundleError as exc:
        raise BundleError(exc.message, path=str(path)) from None
    if not isinstance(raw, dict):
        raise BundleError(f"must hold a JSON object, not {type(raw).__name__}", path=str(path))
    return raw


def _read_checked(bundle_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], Manifest]:
    raw = read_manifest_body(bundle_dir)
    manifest = Manifest.from_dict(raw)
    if manifest_digest(raw) != manifest.bundle_id:
        raise BundleError(
            "was edited after export (its content no longer matches bundle_id "
            f"{manifest.bundle_id}): re-export the bundle",
            path=str(Path(bundle_dir) / MANIFEST_NAME))
    return raw, manifest


def read_manifest(bundle_dir: str | os.PathLike[str]) -> Manifest:
    """Parse and validate ``manifest.json`` (no file hashes checked: use ``verify``)."""
    return _read_checked(bundle_dir)[1]


def verify(bundle_dir: str | os.PathLike[str], *,
           trust: Sequence[TrustKey | str | os.PathLike[str]] | None = None) -> Manifest:
    """Validate the manifest and the SHA-256 of every listed file; refuse unlisted files.

    A ``signature.json``, when present, must be valid. With ``trust`` (public keys or paths to
    them), the bundle must be signed by one of them.
    """
    root = Path(bundle_dir)
    raw, manifest = _read_checked(root)
    present = {p.name for p in root.iterdir()} - {MANIFEST_NAME, SIGNATURE_NAME}
    if SIGNATURE_NAME in manifest.files:
        raise BundleError(f"must not list {SIGNATURE_NAME} (the signature is not hashed)",
                          path="files")
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
    if trust is not None or (root / SIGNATURE_NAME).exists():
        from adaptedge.protocol.signing import check_signature

        check_signature(root, raw, trust)
    return manifest


@contextmanager
def open_bundle(path: str | os.PathLike[str],
                limits: ArchiveLimits = DEFAULT_LIMITS) -> Iterator[Path]:
    """Yield a directory for a bundle given as a directory or an uncompressed ``.tar`` of one
    (unpacked within ``limits`` into a private temporary folder)."""
    p = Path(path)
    if p.is_dir():
        yield p
        return
    if not p.is_file():
        raise BundleError("is neither a bundle directory nor a .tar of one", path=str(p))
    with tempfile.TemporaryDirectory(prefix="adaptedge-bundle-") as tmp:
        extract_tar(p, Path(tmp), limits)
        entries = list(Path(tmp).iterdir())
        root = entries[0] if len(entries) == 1 and entries[0].is_dir() else Path(tmp)
        yield root
