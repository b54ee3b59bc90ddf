"""Best-effort request id of a message that failed validation, so the device can match the
error reply."""

from __future__ import annotations

from typing import Final

import msgpack

from adaptedge.protocol import errors as E
from adaptedge.protocol.codec import MAX_MESSAGE_BYTES

ID_SALVAGE_LIMITS: Final = {
    "raw": False, "strict_map_key": True, "max_bin_len": MAX_MESSAGE_BYTES,
    "max_str_len": 4096, "max_array_len": 16, "max_map_len": 256, "max_ext_len": 0,
}


def salvage_request_id(payload: bytes | bytearray, code: str, device: str) -> int | None:
    """Best effort: the request id of a message that failed validation, so the device can
    match the error reply. Taken only from an array whose id is followed by the topic's device
    (``[..., request_id, device, ...]``, the layout of every request); else ``None``."""
    if code in (E.TOO_LARGE, E.DECODE_FAILED):
        return None
    try:
        obj = msgpack.unpackb(payload, **ID_SALVAGE_LIMITS)
    except Exception:  # malformed input: no id to salvage
        return None
    if type(obj) is not list:
        return None
    for i in (1, 2):
        if len(obj) > i + 1 and type(obj[i]) is int and 0 <= obj[i] < 1 << 64 \
                and obj[i + 1] == device:
            return obj[i]  # type: ignore[no-any-return]
    return None
