"""Downloading an announced bundle image: chunk by chunk over MQTT, or from its URL.

Over MQTT, up to ``window`` chunk requests are in flight; a chunk whose reply has not come
within ``retry_s`` is asked for again (requests and replies travel at QoS 0, so a lost one is
simply repeated). Each chunk is checked against its SHA-256 in the announcement before it is
written at its offset in ``<id>.tar.part``. A part file left by an earlier attempt is re-read
first and every chunk that still matches its hash is kept: downloads resume. At the end the
whole file's size and SHA-256 must match. Everything is bounded: the download gives up after
``timeout_s`` or when a chunk failed ``max_tries`` times.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from adaptedge.edge.errors import EdgeError
from adaptedge.protocol.ota import ChunkReply, UpdateAnnouncement


class DownloadError(EdgeError):
    """A bundle image could not be downloaded or does not match its announcement."""


Progress = Callable[[float], None]


class ChunkDownload:
    """One announced image fetched into ``part`` through ``send(index) -> bool``."""

    def __init__(self, announcement: UpdateAnnouncement, part: Path,
                 send: Callable[[int], bool], *, window: int = 8, retry_s: float = 1.0,
                 max_tries: int = 50, timeout_s: float = 600.0) -> None:
        self.ann = announcement
        self.part = part
        self._send = send
        self.window, self.retry_s = window, retry_s
        self.max_tries, self.timeout_s = max_tries, timeout_s
        self._cond = threading.Condition()
        self._done: set[int] = set()
        self._asked: dict[int, float] = {}
        self._tries: dict[int, int] = {}
        self.refusal: str | None = None
        self.counters = {"chunks_requested": 0, "chunks_received": 0, "chunks_resumed": 0,
                         "chunks_bad": 0, "chunks_late": 0}
        self._fd: int | None = None

    def on_reply(self, reply: ChunkReply) -> None:
        """A chunk reply (network thread): kept if it is one we need and matches its hash."""
        ann = self.ann
        if reply.bundle_id != ann.bundle_id or reply.index >= ann.n_chunks:
            return
        with self._cond:
            if self._fd is None or reply.index in self._done:
                self.counters["chunks_late"] += 1
                return
            if reply.error:
                self.refusal = f"the chunk server refused chunk {reply.index}: {reply.error}"
                self._cond.notify_all()
                return
            if hashlib.sha256(reply.data).digest() != ann.chunk_hashes[reply.index] \
                    or len(reply.data) != self._length(reply.index):
                self.counters["chunks_bad"] += 1
                self._asked.pop(reply.index, None)  # ask again
                self._cond.notify_all()
                return
            os.pwrite(self._fd, reply.data, reply.index * ann.chunk_size)
            self._done.add(reply.index)
            self._asked.pop(reply.index, None)
            self.counters["chunks_received"] += 1
            self._cond.notify_all()

    def _length(self, index: int) -> int:
        ann = self.ann
        return min(ann.chunk_size, ann.size - index * ann.chunk_size)

    def run(self, stop: threading.Event, progress: Progress | None = None) -> Path:
        """Download until every chunk is in, then check size and SHA-256; returns ``part``."""
        n = self.ann.n_chunks
        self.part.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.part, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.ftruncate(fd, self.ann.size)
            self._resume(fd)
            with self._cond:
                self._fd = fd
            deadline = time.monotonic() + self.timeout_s
            while True:
                with self._cond:
                    if self.refusal is not None:
                        raise DownloadError(self.refusal)
                    if len(self._done) == n:
                        break
                    due = self._due(time.monotonic())
                for index in due:
                    self.counters["chunks_requested"] += 1
                    self._send(index)
                if progress is not None:
                    progress(len(self._done) / n)
                if stop.is_set():
                    raise DownloadError("stopped before the download finished")
                if time.monotonic() > deadline:
                    raise DownloadError(f"the download did not finish within {self.timeout_s:g}"
                                        f" s ({len(self._done)} of {n} chunks)")
                with self._cond:
                    self._cond.wait(min(self.retry_s, 0.2))
        finally:
            with self._cond:
                self._fd = None
            os.close(fd)
        check_image(self.part, self.ann)
        return self.part

    def _resume(self, fd: int) -> None:
        """Keep every chunk a previous attempt left in the part file intact."""
        ann = self.ann
        for index in range(ann.n_chunks):
            data = os.pread(fd, self._length(index), index * ann.chunk_size)
            if hashlib.sha256(data).digest() == ann.chunk_hashes[index]:
                self._done.add(index)
        self.counters["chunks_resumed"] = len(self._done)

    def _due(self, now: float) -> list[int]:
        """Chunks to ask for now: missing ones not in flight, and those asked too long ago."""
        due: list[int] = []
        in_flight = sum(1 for t in self._asked.values() if now - t < self.retry_s)
        for index in range(self.ann.n_chunks):
            if in_flight >= self.window:
                break
            if index in self._done:
                continue
            asked = self._asked.get(index)
            if asked is not None and now - asked < self.retry_s:
                continue
            tries = self._tries.get(index, 0) + 1
            if tries > self.max_tries:
                raise DownloadError(f"chunk {index} did not arrive intact after "
                                    f"{self.max_tries} requests")
            self._tries[index] = tries
            self._asked[index] = now
            in_flight += 1
            due.append(index)
        return due


def check_image(path: Path, ann: UpdateAnnouncement) -> None:
    """``DownloadError`` unless ``path`` has the announced size and SHA-256."""
    size = path.stat().st_size
    if size != ann.size:
        raise DownloadError(f"the image is {size} bytes, the announcement says {ann.size}")
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while data := fh.read(1 << 20):
            digest.update(data)
    if digest.digest() != ann.sha256:
        raise DownloadError("the image's SHA-256 does not match the announcement: corrupted "
                            "or altered in transit")


def fetch_url(ann: UpdateAnnouncement, part: Path, timeout_s: float = 60.0) -> Path:
    """Download the image at ``ann.url`` (``file://`` or ``http(s)://``) into ``part``, reading
    at most the announced size (+1 to notice a longer file), then check it."""
    url = urllib.parse.urlsplit(ann.url)
    part.parent.mkdir(parents=True, exist_ok=True)
    try:
        if url.scheme == "file":
            with open(urllib.request.url2pathname(url.path), "rb") as src, part.open("wb") as out:
                shutil.copyfileobj(_Bounded(src, ann.size + 1), out)
        elif url.scheme in ("http", "https"):
            with urllib.request.urlopen(ann.url, timeout=timeout_s) as src, \
                    part.open("wb") as out:  # the scheme was checked above
                shutil.copyfileobj(_Bounded(src, ann.size + 1), out)
        else:
            raise DownloadError(f"cannot download {ann.url[:80]!r}: not file:// or http(s)://")
    except OSError as exc:
        raise DownloadError(f"cannot download {ann.url[:200]}: {exc}") from exc
    check_image(part, ann)
    return part


class _Bounded:
    """A reader that stops after ``limit`` bytes."""

    def __init__(self, source: object, limit: int) -> None:
        self._source, self._left = source, limit

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        n = self._left if n is None or n < 0 else min(n, self._left)
        data: bytes = self._source.read(n)  # type: ignore[attr-defined]
        self._left -= len(data)
        return data
