"""Unpack a ``.tar`` bundle safely: bounded in size and count, regular files and folders only.

The docs name two bundle forms: a directory, or a ``.tar`` of one, uncompressed or xz-compressed
(``.tar.xz``: how an OTA rollout may ship a device bundle, whose points share most of their
trees). An xz stream is read through one decompressor whose memory is bounded
(``max_xz_memory``) and stops at the same byte budget as a plain tar's file size, so a small
``.tar.xz`` that would unpack to gigabytes is refused after the budget, not after the disk is
full. Other compressions are refused before anything is read. A tar is
refused, with one ``BundleError`` line, when it is larger than the limits, holds a link, a
device, a FIFO, a sparse member, a path outside the extraction folder, a duplicate name, or is
truncated. Members are written with exclusive, no-follow creation. A leading ``./`` (``tar -C
bundle .``) is read as the bundle's root.
"""

from __future__ import annotations

import io
import lzma
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

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
    max_xz_memory: int = 128 << 20
    """Decompressor memory an xz stream may ask for (``xz -9`` needs 65 MiB)."""

    @property
    def budget(self) -> int:
        """The most bytes a tar within these limits takes (members, headers, padding)."""
        return self.max_total_bytes + (self.max_members + 8) * 3 * _BLOCK


DEFAULT_LIMITS = ArchiveLimits()


def _refuse(path: Path, why: str) -> BundleError:
    return BundleError(f"{why}; bundles are a directory or a .tar (or .tar.xz) of one",
                       path=str(path))


def _check_format(path: Path, limits: ArchiveLimits) -> bool:
    """Whether ``path`` is xz-compressed (else a plain tar); refuses anything else."""
    with path.open("rb") as fh:
        head = fh.read(_BLOCK)
    for magic, kind in _COMPRESSED.items():
        if head.startswith(magic):
            if kind == "xz":
                return True
            raise _refuse(path, f"is a {kind}-compressed archive: unpack it first")
    if len(head) < _BLOCK or head[257:262] != b"ustar":
        raise _refuse(path, "is not a POSIX .tar archive")
    if path.stat().st_size > limits.budget:
        raise _refuse(path, f"is larger than the {limits.max_total_bytes} bytes a bundle "
                      "archive may hold")
    return False


class _XzStream(io.RawIOBase):
    """An ``.xz`` file's content, read through one bounded decompressor, at most ``cap``
    bytes (a longer stream raises ``BundleError``)."""

    def __init__(self, fh: IO[bytes], path: Path, memlimit: int, cap: int) -> None:
        self._fh, self._path, self._cap, self._out = fh, path, cap, 0
        self._dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=memlimit)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while not self._pending and not self._dec.eof:
            data = self._fh.read(_CHUNK) if self._dec.needs_input else b""
            if self._dec.needs_input and not data:
                raise EOFError("the xz stream ends early")
            self._pending = self._dec.decompress(data, max_length=_CHUNK)
        n = min(len(view), len(self._pending))
        view[:n], self._pending = self._pending[:n], self._pending[n:]
        self._out += n
        if self._out > self._cap:
            raise _refuse(self._path, f"unpacks to more than the {self._cap} bytes a bundle "
                          "archive may hold")
        return n


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
    xz = _check_format(path, limits)
    try:
        with path.open("rb") as fh:
            if xz:
                stream = io.BufferedReader(_XzStream(fh, path, limits.max_xz_memory,
                                                     limits.budget), _CHUNK)
                with tarfile.open(fileobj=stream, mode="r|") as tar:
                    _extract_members(tar, path, dest, limits)
            else:
                with tarfile.open(fileobj=fh, mode="r:") as tar:
                    _extract_members(tar, path, dest, limits)
    except (tarfile.TarError, EOFError, UnicodeError, FileExistsError, NotADirectoryError,
            lzma.LZMAError) as exc:
        raise _refuse(path, f"is not a readable bundle archive ({exc or type(exc).__name__})"
                      ) from None


def _extract_members(tar: tarfile.TarFile, path: Path, dest: Path,
                     limits: ArchiveLimits) -> None:
    """Write every member of ``tar`` (the archive at ``path``) into ``dest`` within limits."""
    seen: set[PurePosixPath] = set()
    total = 0
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
