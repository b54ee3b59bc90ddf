"""Signed bundles: an Ed25519 signature over the bundle id, kept in ``signature.json``.

Hashes prove a bundle is intact, not who made it: anyone who can write a bundle can replace
``hpc.onnx`` and recompute every hash and the id. A signature by a key the device trusts can
not be recomputed. ``signature.json`` is the one bundle file outside the manifest's hashes
(signing does not change the bundle id); it signs ``DOMAIN + bundle_id + "\\n" +
manifest_sha256`` (the full SHA-256 the 24-hex id is cut from), so it covers the manifest and,
through its hashes, every file.

Keys are PEM files: ``signing.key`` (PKCS#8, private, mode 0600) and ``signing.pub``
(SubjectPublicKeyInfo). Key ids are the first 16 hex of the SHA-256 of the raw public key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from adaptedge.protocol.bundle_digest import SIGNATURE_NAME, manifest_sha256
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.strict_json import loads_strict

SIGNATURE_FORMAT = "adaptedge-bundle-signature/1"
DOMAIN = b"adaptedge bundle signature v1\n"
PRIVATE_KEY_NAME = "signing.key"
PUBLIC_KEY_NAME = "signing.pub"
_MAX_KEY_BYTES = 4096
_MAX_SIGNATURE_BYTES = 4096
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW


@dataclass(frozen=True, slots=True)
class TrustKey:
    """A public key bundles may be signed with (32 raw Ed25519 bytes) and where it came from."""

    raw: bytes
    source: str = ""

    @property
    def key_id(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()[:16]


def _read_small(path: Path, limit: int, what: str) -> bytes:
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise BundleError(f"cannot read the {what} ({exc.strerror})", path=str(path)) from None
    if len(data) > limit:
        raise BundleError(f"is too large to be a {what}", path=str(path))
    return data


def load_trust_key(source: TrustKey | str | os.PathLike[str]) -> TrustKey:
    """A trusted public key from a ``signing.pub`` file (or a ``TrustKey`` as is)."""
    if isinstance(source, TrustKey):
        return source
    path = Path(source)
    data = _read_small(path, _MAX_KEY_BYTES, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, Ed25519PublicKey):
        raise BundleError("is not an Ed25519 public key in PEM (use the signing.pub that "
                          "`adaptedge keys new` writes)", path=str(path))
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return TrustKey(raw, str(path))


def load_signing_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The private key of a ``signing.key`` file."""
    p = Path(path)
    data = _read_small(p, _MAX_KEY_BYTES, "private key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, Ed25519PrivateKey):
        raise BundleError("is not an unencrypted Ed25519 private key in PEM (use the "
                          "signing.key that `adaptedge keys new` writes)", path=str(p))
    return key


def write_keypair(out_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Create ``signing.key`` (0600) and ``signing.pub`` in ``out_dir``; never overwrite."""
    out = Path(out_dir)
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    paths = (out / PRIVATE_KEY_NAME, out / PUBLIC_KEY_NAME)
    for path in paths:
        if path.exists() or path.is_symlink():
            raise BundleError("already exists: keys are never overwritten; choose another "
                              "directory", path=str(path))
    for path, data, mode in ((paths[0], private, 0o600), (paths[1], public, 0o644)):
        try:
            fd = os.open(path, _NEW_FILE, mode)
        except FileExistsError:
            raise BundleError("appeared while the keys were written: keys are never "
                              "overwritten; choose another directory", path=str(path)) from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    return paths


def _message(bundle_id: str, digest: str) -> bytes:
    return DOMAIN + f"{bundle_id}\n{digest}".encode()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def write_signature(root: Path, key: Ed25519PrivateKey, bundle_id: str, digest: str) -> None:
    """Write ``signature.json`` for the bundle id and manifest digest into ``root`` (atomically,
    never through a planted link)."""
    public = key.public_key().public_bytes(serialization.Encoding.Raw,
                                           serialization.PublicFormat.Raw)
    doc = {"format": SIGNATURE_FORMAT, "algorithm": "ed25519", "bundle_id": bundle_id,
           "manifest_sha256": digest, "public_key": _b64(public),
           "signature": _b64(key.sign(_message(bundle_id, digest)))}
    tmp = root / f".{SIGNATURE_NAME}.{os.getpid()}.tmp"
    fd = os.open(tmp, _NEW_FILE, 0o644)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, root / SIGNATURE_NAME)


def _field(doc: Mapping[str, Any], name: str, path: str) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not value:
        raise BundleError(f"needs a non-empty string {name!r}", path=path)
    return value


def _decode(doc: Mapping[str, Any], name: str, size: int, path: str) -> bytes:
    try:
        raw = base64.b64decode(_field(doc, name, path), validate=True)
    except binascii.Error:
        raw = b""
    if len(raw) != size:
        raise BundleError(f"{name!r} must be {size} bytes in base64", path=path)
    return raw


def read_signature(root: Path, body: Mapping[str, Any]) -> tuple[TrustKey, bytes] | None:
    """The signer and signature in ``root``'s ``signature.json`` if it signs ``body``."""
    sig_path = root / SIGNATURE_NAME
    if not sig_path.exists() and not sig_path.is_symlink():
        return None
    where = str(sig_path)
    if sig_path.is_symlink() or not sig_path.is_file():
        raise BundleError("must be a regular file", path=where)
    try:
        doc = loads_strict(_read_small(sig_path, _MAX_SIGNATURE_BYTES, "signature"))
    except BundleError as exc:
        raise BundleError(exc.message, path=where) from None
    if not isinstance(doc, dict) or doc.get("format") != SIGNATURE_FORMAT \
            or doc.get("algorithm") != "ed25519":
        raise BundleError(f"is not an {SIGNATURE_FORMAT} Ed25519 signature", path=where)
    signer = TrustKey(_decode(doc, "public_key", 32, where), where)
    signature = _decode(doc, "signature", 64, where)
    bundle_id, digest = str(body.get("bundle_id")), manifest_sha256(body)
    if _field(doc, "bundle_id", where) != bundle_id or \
            _field(doc, "manifest_sha256", where) != digest:
        raise BundleError(f"signs bundle {doc['bundle_id']}, not this bundle ({bundle_id}): "
                          "the manifest changed after signing; sign it again", path=where)
    try:
        Ed25519PublicKey.from_public_bytes(signer.raw).verify(signature,
                                                              _message(bundle_id, digest))
    except InvalidSignature:
        raise BundleError("does not verify: the bundle or its signature was altered",
                          path=where) from None
    return signer, signature


def check_signature(root: Path, body: Mapping[str, Any],
                    trust: Sequence[TrustKey | str | os.PathLike[str]] | None) -> TrustKey | None:
    """Check ``signature.json`` (if any) against ``body``; with ``trust``, require a trusted
    signer. Returns the signer, or ``None`` for an unsigned bundle without ``trust``."""
    keys = None if trust is None else [load_trust_key(k) for k in trust]
    if keys is not None and not keys:
        raise BundleError("the trust list is empty: give at least one public key",
                          path=str(root))
    found = read_signature(root, body)
    if found is None:
        if keys is not None:
            raise BundleError("is not signed, and only bundles signed by a trusted key are "
                              "accepted: sign it with `adaptedge sign`", path=str(root))
        return None
    signer = found[0]
    if keys is not None and signer.raw not in {k.raw for k in keys}:
        trusted = ", ".join(k.key_id for k in keys)
        raise BundleError(f"is signed by key {signer.key_id}, which is not trusted "
                          f"(trusted: {trusted})", path=str(root))
    return signer
