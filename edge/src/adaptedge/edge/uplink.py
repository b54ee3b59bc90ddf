"""The pluggable transport between the device and the cloud HPC."""

from __future__ import annotations

import secrets
from typing import Protocol, runtime_checkable

from adaptedge.edge.errors import EdgeError
from adaptedge.protocol.messages import InferenceRequest, Reply

MAX_REQUEST_ID = (1 << 64) - 1
"""Request ids are unsigned 64-bit integers on the wire (``protocol.codec``)."""


@runtime_checkable
class Uplink(Protocol):
    """What the runtime needs from a transport: MQTT on a device, an in-process one in simulation.

    ``deadline`` is an absolute time in the runtime's clock. ``exchange`` sends the request and
    blocks until its reply (``InferenceReply``, a regression HPC's ``ValueReply`` or an
    ``ErrorReply``) or the deadline, returning ``None`` when no reply came in time. An
    uplink may also expose ``counters: Mapping[str, float]`` (e.g. ``late_replies``); the
    runtime merges them into its own.
    """

    def is_connected(self) -> bool: ...

    def exchange(self, request: InferenceRequest, deadline: float) -> Reply | None: ...


class RequestIds:
    """Request ids of one runtime: consecutive from a random 63-bit base drawn at start.

    The cloud remembers replies by (device, request id). A clock-derived or fixed base repeats
    after a reboot with the clock set back, or across two runtimes given the same start; a
    random base does not (two runs of n requests overlap with probability ~2n / 2**63). The
    63-bit base leaves 2**63 ids before the 64-bit wire range could wrap (it wraps to 0).
    """

    __slots__ = ("_next",)

    def __init__(self, start: int | None = None) -> None:
        if start is None:
            start = secrets.randbits(63)
        elif not 0 <= start <= MAX_REQUEST_ID:
            raise EdgeError(f"request_id_start must be in 0..2**64-1, got {start}")
        self._next = start

    def next(self) -> int:
        """A fresh request id."""
        rid = self._next
        self._next = (rid + 1) & MAX_REQUEST_ID
        return rid


DEFAULT_DEVICE_ID = "edge"


def resolve_device_id(device_id: str | None, uplink: Uplink | None) -> str:
    """The one device id of a runtime: the uplink's (its topics carry it), else the given one,
    else ``DEFAULT_DEVICE_ID``. Two different ids are refused."""
    own = getattr(uplink, "device_id", None)
    if isinstance(own, str):
        if device_id is not None and device_id != own:
            raise EdgeError(f"device_id {device_id!r} differs from the uplink's device id "
                            f"{own!r}: the cloud would answer on {own!r}'s topic and refuse "
                            "the requests; give the id once (to the uplink)")
        return own
    return DEFAULT_DEVICE_ID if device_id is None else device_id
