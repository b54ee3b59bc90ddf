"""A bounded on-disk outbox of escalated inputs, kept for later labelling.

Every escalation is recorded, answered or not: those sent are written before the exchange,
and those never sent (no uplink, uplink down) with what was measured; audited local decisions
too (``edge.audit``). Each is one msgpack file, a ``protocol.store_wire.StoreRecord`` (the
wire encoding of the ``InferenceRequest`` with the row's kind, operating point and the audit
fraction the device used there; files of
older devices hold the bare request and read as escalations). The oldest files go first when
the outbox exceeds ``max_files`` or ``max_bytes``, and files older than ``max_age_s`` are
dropped. Records are written 0600 (in a folder created 0700): they hold sensor readings.
Writing never fails a decision: an ``OSError`` is counted in ``errors`` and the record
is skipped. ``edge.drain`` forwards the files to the cloud and removes each one only once the
cloud acknowledged it; a lock makes recording and removing safe from two threads.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import MutableMapping
from pathlib import Path

from adaptedge.protocol.codec import decode, encode
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.fleet_rows import RowKind
from adaptedge.protocol.messages import InferenceRequest
from adaptedge.protocol.store_wire import StoreRecord, decode_record, encode_record

SUFFIX = ".msgpack"


class Outbox:
    def __init__(self, directory: str | os.PathLike[str], *, max_files: int = 10_000,
                 max_bytes: int = 64 << 20, max_age_s: float = 7 * 24 * 3600.0) -> None:
        if max_files < 1 or max_bytes < 1 or max_age_s <= 0:
            raise ValueError("outbox limits must be positive (max_files, max_bytes, max_age_s)")
        self.directory = Path(directory)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.errors = 0
        self._lock = threading.Lock()
        self._entries: list[tuple[Path, int, float]] = []  # oldest first: path, size, mtime
        self._bytes = 0
        self.rescan()

    def rescan(self) -> None:
        """Re-read the folder (another process, e.g. ``edge run``, may have added files)."""
        entries = []
        for path in sorted(self.directory.glob(f"*{SUFFIX}")):
            try:
                st = path.stat()
            except OSError:
                continue
            entries.append((path, st.st_size, st.st_mtime))
        entries.sort(key=lambda e: (e[2], e[0].name))
        with self._lock:
            self._entries = entries
            self._bytes = sum(e[1] for e in entries)
            self._prune(time.time())

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def total_bytes(self) -> int:
        return self._bytes

    def record(self, request: InferenceRequest, kind: RowKind = "escalated",
               point: int | None = None, audit_fraction: float | None = None,
               local_value: float | None = None) -> Path | None:
        """Keep one request as a record of ``kind`` made at operating point index ``point``
        by a device auditing ``audit_fraction`` of its local decisions there; ``local_value``:
        a regression device's own answer (None for classification)."""
        now = time.time()
        data = encode_record(StoreRecord(kind, point, encode(request), audit_fraction,
                                         local_value))
        path = self.directory / f"{time.time_ns():020d}-{request.request_id}{SUFFIX}"
        tmp = path.with_suffix(".tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # sensor readings
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            tmp.replace(path)
        except OSError:
            self.errors += 1
            return None
        with self._lock:
            self._entries.append((path, len(data), now))
            self._bytes += len(data)
            self._prune(now)
        return path

    def oldest(self, n: int) -> list[Path]:
        """The ``n`` oldest record files."""
        with self._lock:
            return [e[0] for e in self._entries[:n]]

    def remove(self, path: Path) -> None:
        """Delete one record (after the cloud acknowledged it)."""
        with self._lock:
            for i, entry in enumerate(self._entries):
                if entry[0] == path:
                    del self._entries[i]
                    self._bytes -= entry[1]
                    break
        self._unlink(path)

    def _unlink(self, path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            self.errors += 1

    def _prune(self, now: float) -> None:
        while self._entries and (len(self._entries) > self.max_files
                                 or self._bytes > self.max_bytes
                                 or now - self._entries[0][2] > self.max_age_s):
            path, size, _ = self._entries.pop(0)
            self._bytes -= size
            self._unlink(path)

    def requests(self) -> list[InferenceRequest]:
        """The recorded requests, oldest first (unreadable files are skipped)."""
        with self._lock:
            paths = [e[0] for e in self._entries]
        out: list[InferenceRequest] = []
        for path in paths:
            try:
                out.append(read_record(path)[2])
            except (OSError, ProtocolError):
                continue
        return out


def read_record(path: Path) -> tuple[bytes, StoreRecord, InferenceRequest]:
    """The store-topic payload of a record file, the record and its request (a file of an
    older device, a bare request, becomes an escalation record). ``OSError`` if it cannot be
    read, ``ProtocolError`` if it is not a record."""
    data = path.read_bytes()
    try:
        record, request = decode_record(data)
    except ProtocolError:
        message = decode(data)
        if type(message) is not InferenceRequest:
            raise ProtocolError("bad_type", f"{path} holds a {type(message).__name__}, not an "
                                "outbox record") from None
        record, request = StoreRecord("escalated", None, data), message
        data = encode_record(record)
    return data, record, request


def keep_escalation(outbox: Outbox | None, request: InferenceRequest,
                    counters: MutableMapping[str, float], kind: RowKind = "escalated",
                    point: int | None = None, audit_fraction: float | None = None,
                    local_value: float | None = None) -> None:
    """Record a request (with a regression device's own value, when finite); a write that
    fails counts in ``outbox_errors``."""
    if outbox is None:
        return
    if local_value is not None and not math.isfinite(local_value):
        local_value = None  # no value the HPC's could be compared with
    try:
        kept = outbox.record(request, kind, point, audit_fraction, local_value) is not None
    except (OSError, ValueError):  # ValueError: the request does not encode
        kept = False
    if not kept:
        counters["outbox_errors"] += 1
