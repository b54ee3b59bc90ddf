"""What a worker has read from its MQTT connection but not yet handed to the service core, and
the PUBACKs it owes.

The worker reads everything waiting on its socket before it computes the next batch, so the
TCP stream from the broker never holds a backlog. The broker's PUBACKs for the worker's own
replies travel on that stream: behind a deep backlog they took as long as the backlog, the
replies waiting for them piled up in paho past its 65,535 message ids, and paho overwrote
some of them (issue 31, a 3,000 req/s backlog: 67,901 of 150,000 replies never left). What
waits now waits here (the core sees a message when it takes it, so a request's age counts
this wait as it counts the broker's), or, with a broker that bounds the messages in flight to
a client (mosquitto's default is 20), in the broker: a request's PUBACK is sent only once its reply is out (paho's manual acks).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import paho.mqtt.client as mqtt


class Received(NamedTuple):
    """A message read: ``topic`` None when it is not UTF-8; ``mid`` 0 when no PUBACK is owed."""

    topic: str | None
    payload: bytes | bytearray
    retained: bool
    mid: int


class Inbox:
    """Messages read, oldest first, and the message ids whose PUBACK waits for their replies."""

    def __init__(self) -> None:
        self._items: deque[Received] = deque()
        self._owed: list[int] = []

    def __len__(self) -> int:
        return len(self._items)

    def put(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        """paho's ``on_message``: keep the message until the core takes it."""
        try:
            topic: str | None = message.topic
        except UnicodeDecodeError:  # paho raises on a topic that is not UTF-8
            topic = None
        self._items.append(Received(topic, message.payload, message.retain,
                                    message.mid if message.qos == 1 else 0))

    def take(self) -> Received:
        """The oldest message; its PUBACK (if any) is owed from now on (``IndexError`` if
        empty)."""
        item = self._items.popleft()
        if item.mid:
            self._owed.append(item.mid)
        return item

    def settle(self, ack: Callable[[int, int], Any]) -> None:
        """Send every owed PUBACK with ``ack(mid, qos)`` (``client.ack``): call it when the
        replies of everything taken are out."""
        for mid in self._owed:
            ack(mid, 1)
        self._owed.clear()

    @property
    def owes(self) -> bool:
        return bool(self._owed)

    def reconnected(self) -> None:
        """A new connection: the ids of the lost one mean nothing to the broker any more."""
        self._owed.clear()
        self._items = deque(item._replace(mid=0) for item in self._items)
