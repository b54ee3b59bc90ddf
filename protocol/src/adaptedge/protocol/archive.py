"""Unpack a ``.tar`` bundle safely: bounded in size and count, regular files and folders only.

The docs name two bundle forms: a directory, or an uncompressed ``.tar`` of one. Compressed
archives are refused before anything is read (a 2 MB ``.tar.gz`` can hold gigabytes). A tar is
refused, with one ``BundleError`` line, when it is larger than the limits, holds a link, a
device, a FIFO, a sparse member, a path outside the extraction folder, a duplicate name, or is
truncated. Members are written with exclusive, no-follow creation. A leading ``./`` (``tar -C
bundle .``) is read as the bundle's root.
"""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from adaptedge.protocol.errors import BundleError

_BLOCK = 512
_CHUNK = 1 << 20
_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz",
               b"\x28\xb5\x2f\xfd": "zstd", b"PK\x03\x04": "zip"}


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """What a bundle archive may hold. The defaults fit the largest trained bundles seen."""

    max_members: int = 4096
    max_member_bytes: int = 1 << 30
    max_total_bytes: int = 1 << 30


DEFAULT_LIMITS = ArchiveLimits()


def _refuse(path: Path, why: str) -> BundleError:
    return BundleError(f"{why}; bundles are a directory or an uncompressed .tar of one",
                       path=str(path))


def _check_format(path: Path, limits: ArchiveLimits) -> None:
    with path.open("rb") as fh:
        head = fh.read(_BLOCK)
    for magic, kind in _COMPRESSED.items():
        if head.startswith(magic):
            raise _refuse(path, f"is a {kind}-compressed archive: unpack it first")
    if len(head) < _BLOCK or head[257:262] != b"ustar":
        raise _refuse(path, "is not a POSIX .tar archive")
    budget = limits.max_total_bytes + (limits.max_members + 8) * 3 * _BLOCK
    if path.stat().st_size > budget:
        raise _refuse(path, f"is larger than the {limits.max_total_bytes} bytes a bundle "
                      "archive may hold")


def _member_path(member: tarfile.TarInfo) -> PurePosixPath | None:
    """The member's path inside the bundle; ``None`` for the archive's own root folder
    (``tar -cf b.tar -C bundle .`` writes ``.`` and ``./manifest.json``)."""
    name = member.name
    while name.startswith("./"):
        name = name[2:]
    if name in ("", ".") and member.isdir():
        return None
    rel = PurePosixPath(name)
    if (not name or "\\" in name or "\x00" in name or rel.is_absolute()
            or any(part in ("", ".", "..") for part in name.split("/"))
            or len(rel.parts) > 2):
        raise BundleError("is not a plain path inside the bundle (absolute, '..', or nested "
                          "deeper than one folder): refusing the archive", path=name)
    return rel


def _check_member(member: tarfile.TarInfo, limits: ArchiveLimits) -> None:
    if member.issparse():
        raise BundleError("is a sparse member: refusing the archive", path=member.name)
    if not (member.isreg() or member.isdir()):
        kind = ("a link" if member.issym() or member.islnk() else
                "a FIFO" if member.isfifo() else
                "a device" if member.ischr() or member.isblk() else "not a regular file")
        raise BundleError(f"is {kind}: bundle archives hold regular files only",
                          path=member.name)
    if member.size > limits.max_member_bytes:
        raise BundleError(f"is {member.size} bytes, over the limit of "
                          f"{limits.max_member_bytes}: refusing the archive", path=member.name)


def _copy(source: IO[bytes], target: Path, size: int) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    written = 0
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(min(_CHUNK, size - written)):
            out.write(chunk)
            written += len(chunk)
    if written != size:
        raise BundleError(f"is truncated ({written} of {size} bytes)", path=target.name)


def extract_tar(archive: str | os.PathLike[str], dest: Path,
                limits: ArchiveLimits = DEFAULT_LIMITS) -> None:
    """Unpack ``archive`` into the empty folder ``dest`` within ``limits``, or raise BundleError."""
    path = Path(archive)
    _check_format(path, limits)
    seen: set[PurePosixPath] = set()
    total = 0
    try:
        with tarfile.open(path, mode="r:") as tar:
            for count, member in enumerate(tar, start=1):
                if count > limits.max_members:
                    raise _refuse(path, f"holds more than {limits.max_members} members")
                rel = _member_path(member)
                if rel is None:
                    continue
                _check_member(member, limits)
                if rel in seen:
                    raise BundleError("appears twice in the archive", path=member.name)
                seen.add(rel)
                total += member.size
                if total > limits.max_total_bytes:
                    raise _refuse(path, f"unpacks to more than {limits.max_total_bytes} bytes")
                target = dest.joinpath(*rel.parts)
                if member.isdir():
                    target.mkdir(mode=0o700, exist_ok=True)
                    continue
                target.parent.mkdir(mode=0o700, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None  # a regular member always has data
                _copy(source, target, member.size)
    except (tarfile.TarError, EOFError, UnicodeError, FileExistsError, NotADirectoryError) as exc:
        raise _refuse(path, f"is not a readable bundle archive ({exc or type(exc).__name__})"
                      ) from None
