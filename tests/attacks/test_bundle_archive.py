"""Issue 15 items 10 and 13: bundle archives are unpacked within bounds, or refused in one line."""

from __future__ import annotations

import gzip
import io
import lzma
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from adaptedge.protocol import BundleError, Manifest, open_bundle, verify
from adaptedge.protocol.archive import ArchiveLimits

GIB = 1 << 30


def _tar_of(bundle: Path, archive: Path) -> Path:
    with tarfile.open(archive, "w") as tar:
        tar.add(bundle, arcname="toy")
    return archive


def _tar_with(archive: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return archive


def _info(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size, link
    return info


def _refused(archive: Path, match: str) -> None:
    with pytest.raises(BundleError, match=match), open_bundle(archive):
        pass


def test_a_plain_tar_still_opens(toy_bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    path, written = toy_bundle
    with open_bundle(_tar_of(path, tmp_path / "toy.tar")) as root:
        assert verify(root) == written


@pytest.mark.slow
def test_a_gzip_bomb_is_refused_quickly_without_unpacking(tmp_path: Path) -> None:
    """A ~2 MB .tar.gz whose one member is 2 GiB of zeros (built as a stream, never on disk)."""
    archive = tmp_path / "bomb.tar.gz"
    header = _info("toy/hpc.onnx", size=2 * GIB).tobuf(format=tarfile.USTAR_FORMAT)
    zeros = bytes(1 << 20)
    with gzip.open(archive, "wb", compresslevel=1) as gz:
        gz.write(header)
        for _ in range(2 * 1024):
            gz.write(zeros)
        gz.write(bytes(1024))
    assert archive.stat().st_size < 12 << 20
    started = time.monotonic()
    _refused(archive, "gzip-compressed")
    assert time.monotonic() - started < 1.0


def _xz(data: bytes, archive: Path, preset: int = 6) -> Path:
    archive.write_bytes(lzma.compress(data, format=lzma.FORMAT_XZ, preset=preset))
    return archive


def test_an_xz_tar_opens(toy_bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    path, written = toy_bundle
    archive = _xz(_tar_of(path, tmp_path / "toy.tar").read_bytes(), tmp_path / "toy.tar.xz")
    with open_bundle(archive) as root:
        assert verify(root) == written


def test_an_xz_bomb_is_refused_before_it_is_unpacked(tmp_path: Path) -> None:
    """A 2 GiB member claimed by a header (refused before its data is read), and a pax header
    far longer than the archive's byte budget (refused at the budget, not read whole)."""
    header = _info("toy/hpc.onnx", size=2 * GIB).tobuf(format=tarfile.USTAR_FORMAT)
    started = time.monotonic()
    _refused(_xz(header + bytes(1 << 20), tmp_path / "big.tar.xz"), "over the limit")
    assert time.monotonic() - started < 1.0
    info = _info("a.onnx", size=1)
    info.pax_headers = {"comment": "x" * (4 << 20)}
    pax = _xz(_tar_with(tmp_path / "pax.tar", [(info, b"x")]).read_bytes(), tmp_path / "p.xz")
    assert pax.stat().st_size < 4096
    with pytest.raises(BundleError, match="unpacks to more than the 37648 bytes"), \
            open_bundle(pax, ArchiveLimits(max_members=10, max_total_bytes=10_000)):
        pass


def test_an_xz_stream_needing_too_much_memory_or_cut_short_is_refused(
        toy_bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    tar = _tar_of(toy_bundle[0], tmp_path / "toy.tar").read_bytes()
    big_window = _xz(tar, tmp_path / "w.tar.xz", preset=9)  # a 64 MiB dictionary
    with pytest.raises(BundleError, match=r"not a readable bundle archive.*[Mm]emory"), \
            open_bundle(big_window, ArchiveLimits(max_xz_memory=8 << 20)):
        pass
    whole = big_window.read_bytes()
    cut = tmp_path / "cut.tar.xz"
    cut.write_bytes(whole[: len(whole) // 2])
    _refused(cut, "not a readable|truncated")


def test_a_huge_member_in_a_plain_tar_is_refused(tmp_path: Path) -> None:
    """A sparse 2 GiB .tar (a header and a hole): refused by size, nothing written."""
    archive = tmp_path / "big.tar"
    with archive.open("wb") as fh:
        fh.write(_info("toy/hpc.onnx", size=2 * GIB).tobuf(format=tarfile.USTAR_FORMAT))
        fh.truncate(512 + 2 * GIB + 1024)
    _refused(archive, "larger than")
    small = ArchiveLimits(max_member_bytes=1000, max_total_bytes=10_000)
    member = _tar_with(tmp_path / "member.tar", [(_info("a.onnx", size=2000), bytes(2000))])
    with pytest.raises(BundleError, match=r"a\.onnx.*over the limit"), open_bundle(member, small):
        pass


def test_too_many_members_and_too_many_bytes_are_refused(tmp_path: Path) -> None:
    many = _tar_with(tmp_path / "many.tar", [(_info(f"f{i}", size=1), b"x") for i in range(20)])
    with pytest.raises(BundleError, match="more than 10 members"), \
            open_bundle(many, ArchiveLimits(max_members=10)):
        pass
    with pytest.raises(BundleError, match="more than 15 bytes"), \
            open_bundle(many, ArchiveLimits(max_total_bytes=15)):
        pass


@pytest.mark.parametrize(("member", "match"), [
    (_info("../evil.onnx", size=1), "not a plain path"),
    (_info("/etc/evil", size=1), "not a plain path"),
    (_info("toy/a/b/deep.onnx", size=1), "not a plain path"),
    (_info("toy/link", tarfile.SYMTYPE, link="/etc/passwd"), "is a link"),
    (_info("toy/hard", tarfile.LNKTYPE, link="toy/manifest.json"), "is a link"),
    (_info("toy/fifo", tarfile.FIFOTYPE), "is a FIFO"),
    (_info("toy/dev", tarfile.CHRTYPE), "is a device"),
])
def test_hostile_members_are_refused(tmp_path: Path, member: tarfile.TarInfo, match: str) -> None:
    data = b"x" if member.isreg() else None
    archive = _tar_with(tmp_path / "evil.tar", [(_info("toy", tarfile.DIRTYPE), None),
                                                 (member, data)])
    _refused(archive, match)
    assert not (tmp_path / "evil.onnx").exists()


def test_duplicate_and_truncated_archives_are_refused(toy_bundle: tuple[Path, Manifest],
                                                      tmp_path: Path) -> None:
    dup = _tar_with(tmp_path / "dup.tar", [(_info("a.onnx", size=1), b"x"),
                                           (_info("a.onnx", size=1), b"y")])
    _refused(dup, "twice")
    whole = _tar_of(toy_bundle[0], tmp_path / "toy.tar").read_bytes()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(whole[: len(whole) // 2 + 100])
    _refused(cut, "truncated|not a readable")


def test_the_cli_reports_a_bad_archive_in_one_line(tmp_path: Path) -> None:
    archive = _tar_with(tmp_path / "evil.tar", [(_info("../../evil", size=1), b"x")])
    out = subprocess.run([sys.executable, "-m", "adaptedge.cli.main", "inspect", str(archive)],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONWARNINGS": "error"})
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a plain path" in lines[0], out.stderr
