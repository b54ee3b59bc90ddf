"""The pluggable transport between the device and the cloud HPC."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from adaptedge.protocol.messages import ErrorReply, InferenceReply, InferenceRequest


@runtime_checkable
class Uplink(Protocol):
    """What the runtime needs from a transport: MQTT on a device, an in-process one in simulation.

    ``deadline`` is an absolute time in the runtime's clock. ``exchange`` sends the request and
    blocks until its reply or the deadline, returning ``None`` when no reply came in time. An
    uplink may also expose ``counters: Mapping[str, float]`` (e.g. ``late_replies``); the
    runtime merges them into its own.
    """

    def is_connected(self) -> bool: ...

    def exchange(
        self, request: InferenceRequest, deadline: float
    ) -> InferenceReply | ErrorReply | None: ...
