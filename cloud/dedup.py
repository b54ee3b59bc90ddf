"""Answer a redelivered request once: an LRU of recent ``(device, request_id)`` pairs.

Policy: a duplicate of a request that is still waiting in the current batch is dropped (the
batch will answer it); a duplicate of an answered request gets the cached reply bytes sent
again, so a device that re-asks is answered identically and the HPC runs once per request.
Devices deduplicate replies by request id.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

PENDING: Final = b""
"""Cache value of a request accepted but not answered yet."""


class RecentRequests:
    """Bounded LRU of ``(device, request_id) -> reply bytes`` (``PENDING`` until answered)."""

    def __init__(self, capacity: int = 8192) -> None:
        if capacity < 1:
            raise ValueError(f"dedup capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, int], bytes] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def seen(self, device: str, request_id: int) -> bytes | None:
        """``None`` for a new request (now remembered as pending), else its cached entry."""
        key = (device, request_id)
        entries = self._entries
        cached = entries.get(key)
        if cached is not None:
            entries.move_to_end(key)
            return cached
        entries[key] = PENDING
        if len(entries) > self.capacity:
            entries.popitem(last=False)
        return None

    def answered(self, device: str, request_id: int, reply: bytes) -> None:
        key = (device, request_id)
        if key in self._entries:
            self._entries[key] = reply

    def forget(self, device: str, request_id: int) -> None:
        self._entries.pop((device, request_id), None)
