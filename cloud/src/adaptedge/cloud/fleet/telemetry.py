"""Device telemetry as the cloud reads it: only what a device says about itself.

The ACL lets a device write only its own telemetry topic, but the message names its source
itself: a ``Telemetry`` whose ``source`` is not the device of the topic it came on is a device
speaking for another one, and is dropped and counted, never recorded.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

from adaptedge.protocol.codec import decode
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.messages import Telemetry
from adaptedge.protocol.topics import DEFAULT_PREFIX, parse

SOURCE_LIMIT: Final = 65_536


class TelemetryInbox:
    """The latest telemetry per source, for messages whose source matches their topic."""

    def __init__(self, prefix: str = DEFAULT_PREFIX, capacity: int = SOURCE_LIMIT) -> None:
        self.prefix = prefix
        self.capacity = capacity
        self.latest: OrderedDict[str, Telemetry] = OrderedDict()
        self.accepted = 0
        self.mismatched = 0
        self.rejected = 0

    def accept(self, topic: str, payload: bytes | bytearray) -> Telemetry | None:
        """Record and return the telemetry, or ``None`` (counted) when it is not valid
        telemetry from the topic's own device."""
        try:
            parsed = parse(topic, self.prefix)
            message = decode(payload)
        except ProtocolError:
            self.rejected += 1
            return None
        if parsed.channel != "telemetry" or type(message) is not Telemetry:
            self.rejected += 1
            return None
        if message.source != parsed.device:
            self.mismatched += 1
            return None
        self.accepted += 1
        self.latest[message.source] = message
        self.latest.move_to_end(message.source)
        if len(self.latest) > self.capacity:
            self.latest.popitem(last=False)
        return message

    def counters(self) -> dict[str, float]:
        return {"telemetry_accepted": self.accepted, "telemetry_mismatched": self.mismatched,
                "telemetry_rejected": self.rejected}
