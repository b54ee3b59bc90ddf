"""A bounded on-disk outbox of escalated inputs, kept for later labelling.

Every escalation is recorded, answered or not: those sent are written before the exchange,
and those never sent (no uplink, uplink down) with what was measured. Each is one msgpack
file (the wire encoding of the ``InferenceRequest``). The oldest files go first when the outbox exceeds ``max_files`` or
``max_bytes``, and files older than ``max_age_s`` are dropped. Writing never fails a decision:
an ``OSError`` is counted in ``errors`` and the record is skipped.
"""

from __future__ import annotations

import os
import time
from collections.abc import MutableMapping
from pathlib import Path

from adaptedge.protocol.codec import decode, encode
from adaptedge.protocol.messages import InferenceRequest

SUFFIX = ".msgpack"


class Outbox:
    def __init__(self, directory: str | os.PathLike[str], *, max_files: int = 10_000,
                 max_bytes: int = 64 << 20, max_age_s: float = 7 * 24 * 3600.0) -> None:
        if max_files < 1 or max_bytes < 1 or max_age_s <= 0:
            raise ValueError("outbox limits must be positive (max_files, max_bytes, max_age_s)")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.errors = 0
        self._entries: list[tuple[Path, int, float]] = []  # oldest first: path, size, mtime
        for path in sorted(self.directory.glob(f"*{SUFFIX}")):
            try:
                st = path.stat()
            except OSError:
                continue
            self._entries.append((path, st.st_size, st.st_mtime))
        self._entries.sort(key=lambda e: (e[2], e[0].name))
        self._bytes = sum(e[1] for e in self._entries)
        self._prune(time.time())

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def total_bytes(self) -> int:
        return self._bytes

    def record(self, request: InferenceRequest) -> Path | None:
        now = time.time()
        data = encode(request)
        path = self.directory / f"{time.time_ns():020d}-{request.request_id}{SUFFIX}"
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_bytes(data)
            tmp.replace(path)
        except OSError:
            self.errors += 1
            return None
        self._entries.append((path, len(data), now))
        self._bytes += len(data)
        self._prune(now)
        return path

    def _prune(self, now: float) -> None:
        while self._entries and (len(self._entries) > self.max_files
                                 or self._bytes > self.max_bytes
                                 or now - self._entries[0][2] > self.max_age_s):
            path, size, _ = self._entries.pop(0)
            self._bytes -= size
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                self.errors += 1

    def requests(self) -> list[InferenceRequest]:
        """The recorded requests, oldest first (unreadable files are skipped)."""
        out: list[InferenceRequest] = []
        for path, _, _ in self._entries:
            try:
                message = decode(path.read_bytes())
            except (OSError, ValueError):
                continue
            if isinstance(message, InferenceRequest):
                out.append(message)
        return out


def keep_escalation(outbox: Outbox | None, request: InferenceRequest,
                    counters: MutableMapping[str, float]) -> None:
    """Record an escalated request; a write that fails counts in ``outbox_errors``."""
    if outbox is None:
        return
    try:
        kept = outbox.record(request) is not None
    except (OSError, ValueError):  # ValueError: the request does not encode
        kept = False
    if not kept:
        counters["outbox_errors"] += 1
