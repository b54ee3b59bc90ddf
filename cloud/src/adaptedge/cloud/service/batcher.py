"""Micro-batching: collect requests and flush at N of them, after T ms, or when input goes idle."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class MicroBatch(Generic[T]):
    """Pending items and the monotonic time the oldest arrived.

    The service flushes when ``full``, when ``due(now)``, or as soon as no more input is
    immediately readable — so a lone request waits for nobody, and a burst shares one call.
    """

    def __init__(self, max_batch: int = 32, max_wait_ms: float = 2.0) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if not max_wait_ms >= 0:
            raise ValueError(f"max_wait_ms must be >= 0, got {max_wait_ms}")
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1000.0
        self.items: list[T] = []
        self.first_at = 0.0

    def __len__(self) -> int:
        return len(self.items)

    def add(self, item: T, now: float) -> bool:
        """Append; True when the batch is now full and must be flushed."""
        if not self.items:
            self.first_at = now
        self.items.append(item)
        return len(self.items) >= self.max_batch

    @property
    def full(self) -> bool:
        return len(self.items) >= self.max_batch

    def due(self, now: float) -> bool:
        return bool(self.items) and now - self.first_at >= self.max_wait_s

    def time_left(self, now: float) -> float:
        """Seconds until the oldest item's wait runs out (0 when due, inf when empty)."""
        if not self.items:
            return float("inf")
        return max(0.0, self.first_at + self.max_wait_s - now)

    def take(self) -> list[T]:
        items, self.items = self.items, []
        return items
