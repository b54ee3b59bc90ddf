"""Answer a redelivered request once: an LRU of recent ``(device, request_id)`` pairs, each with
a key of the request's content (``content_key``).

Policy: a duplicate (same id, same content) of a request still waiting in the current batch
is dropped (the batch will answer it); a duplicate of an answered request gets the cached
reply bytes sent again, so a device that re-asks is answered identically and the HPC runs
once per request. A reused id with *different* content is never given the cached answer:
it is answered for its own content (or refused ``id_reused`` while the first is still in the
batch, when two replies with one id could not be told apart). Only answers are cached: an
error reply never replaces a cached answer, and a request whose answer was an error is
computed again when asked again. Devices deduplicate replies by request id.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Final, TypeAlias

from adaptedge.protocol.messages import InferenceRequest

PENDING: Final = b""
"""Cached reply of a request accepted but not answered yet."""
REUSED: Final = b"\0id_reused"
"""``seen``'s answer for an id still pending with different content (refuse it ``id_reused``)."""
KEY_BYTES_LIMIT: Final = 1024
"""Feature bytes up to which a request's content is its own key (no hashing): the cache then
holds at most ``capacity`` x ~1.2 KB of request content; larger requests are keyed by digest."""

ContentKey: TypeAlias = bytes | tuple[str, bytes, bytes]
"""What the cache compares (``==``) to tell a request's content apart."""


def content_digest(request: InferenceRequest) -> bytes:
    """Digest of everything that determines the answer: bundle, feature bytes and mask."""
    h = hashlib.blake2b(digest_size=16)
    bundle = request.bundle_id.encode()
    h.update(len(bundle).to_bytes(2, "little"))
    h.update(bundle)
    h.update(len(request.features).to_bytes(4, "little"))
    h.update(request.features)
    h.update(request.mask)
    return h.digest()


def content_key(request: InferenceRequest) -> ContentKey:
    """Equal iff the bundle, feature bytes and mask are: the request's own (immutable) bytes
    when small, else ``content_digest``. A given content always gets the same kind of key."""
    features = request.features
    if len(features) <= KEY_BYTES_LIMIT:
        return (request.bundle_id, features, request.mask)
    return content_digest(request)


class RecentRequests:
    """Bounded LRU of ``(device, request_id) -> (content key, reply bytes)`` (``PENDING`` until
    answered)."""

    def __init__(self, capacity: int = 8192) -> None:
        if capacity < 1:
            raise ValueError(f"dedup capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, int], tuple[ContentKey, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def seen(self, device: str, request_id: int, digest: ContentKey) -> bytes | None:
        """``None`` for a request to compute (now remembered as pending with this digest);
        ``PENDING`` or the cached reply for a duplicate; ``REUSED`` for an id still pending
        with other content."""
        key = (device, request_id)
        entries = self._entries
        cached = entries.get(key)
        if cached is not None:
            entries.move_to_end(key)
            if cached[0] == digest:
                return cached[1]
            if cached[1] == PENDING:
                return REUSED
        entries[key] = (digest, PENDING)  # new, or a reused id: answer it for its own content
        if len(entries) > self.capacity:
            entries.popitem(last=False)
        return None

    def answered(self, device: str, request_id: int, digest: ContentKey, reply: bytes) -> None:
        """Cache the answer to the request with this digest (if it is still the one held)."""
        key = (device, request_id)
        cached = self._entries.get(key)
        if cached is not None and cached[0] == digest:
            self._entries[key] = (digest, reply)

    def settle(self, device: str, request_id: int, digest: ContentKey, payload: bytes, *,
               answer: bool) -> None:
        """The reply to the request with this digest went out: an answer is cached, an error
        forgets the request (unless an answer is cached)."""
        if answer:
            self.answered(device, request_id, digest, payload)
        else:
            self.failed(device, request_id, digest)

    def failed(self, device: str, request_id: int, digest: ContentKey) -> None:
        """The request with this digest got an error: forget it unless an answer is cached."""
        key = (device, request_id)
        cached = self._entries.get(key)
        if cached is not None and cached[0] == digest and cached[1] == PENDING:
            del self._entries[key]
