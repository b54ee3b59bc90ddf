"""MQTT topic names: ``<prefix>/v1/<device>/{req,resp,telemetry}`` (and the over-the-air
``update``, ``fetch``, ``chunk``: ``protocol.ota``; the store-and-forward ``store``, device to
cloud, and ``stored``, the cloud's acknowledgement once a record is durably stored:
``protocol.store_wire``) and the shared-subscription form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from adaptedge.protocol.errors import BAD_TOPIC, ProtocolError

TOPIC_VERSION = "v1"
DEFAULT_PREFIX = "adaptedge"
Channel = Literal["req", "resp", "telemetry", "update", "fetch", "chunk", "store", "stored"]
CHANNELS: tuple[Channel, ...] = ("req", "resp", "telemetry", "update", "fetch", "chunk", "store",
                                 "stored")
_FORBIDDEN = ("/", "+", "#", "\x00")


def _check_segment(kind: str, value: str) -> None:
    if not value or any(ch in value for ch in _FORBIDDEN) or value.startswith("$"):
        raise ProtocolError(
            BAD_TOPIC,
            f"{kind} {value!r} is not a valid topic segment: use a non-empty name without "
            "'/', '+', '#', NUL or a leading '$'",
        )


def _check_prefix(prefix: str) -> None:
    for part in prefix.split("/"):
        _check_segment("prefix segment", part)


def topic(device: str, channel: Channel, prefix: str = DEFAULT_PREFIX) -> str:
    """The topic of one device's channel, e.g. ``adaptedge/v1/dev1/req``."""
    _check_prefix(prefix)
    _check_segment("device id", device)
    if channel not in CHANNELS:
        raise ProtocolError(BAD_TOPIC, f"channel {channel!r} is not one of {CHANNELS}")
    return f"{prefix}/{TOPIC_VERSION}/{device}/{channel}"


def request_topic(device: str, prefix: str = DEFAULT_PREFIX) -> str:
    return topic(device, "req", prefix)


def reply_topic(device: str, prefix: str = DEFAULT_PREFIX) -> str:
    return topic(device, "resp", prefix)


def telemetry_topic(device: str, prefix: str = DEFAULT_PREFIX) -> str:
    return topic(device, "telemetry", prefix)


def wildcard(channel: Channel, prefix: str = DEFAULT_PREFIX) -> str:
    """Every device's topic of one channel: ``<prefix>/v1/+/<channel>``."""
    _check_prefix(prefix)
    return f"{prefix}/{TOPIC_VERSION}/+/{channel}"


def shared(group: str, topic_filter: str) -> str:
    """The shared-subscription form ``$share/<group>/<filter>`` (MQTT 5, mosquitto >= 1.6)."""
    _check_segment("share group", group)
    return f"$share/{group}/{topic_filter}"


@dataclass(frozen=True, slots=True)
class ParsedTopic:
    prefix: str
    device: str
    channel: Channel


def parse(name: str, prefix: str = DEFAULT_PREFIX) -> ParsedTopic:
    """Split a concrete topic into prefix, device and channel; ``ProtocolError`` if it is not ours."""
    head = f"{prefix}/{TOPIC_VERSION}/"
    if not name.startswith(head):
        raise ProtocolError(BAD_TOPIC, f"topic {name!r} does not start with {head!r}")
    rest = name[len(head) :].split("/")
    if len(rest) != 2:
        raise ProtocolError(BAD_TOPIC, f"topic {name!r} is not {head}<device>/<channel>")
    device, channel = rest
    _check_segment("device id", device)
    if channel not in CHANNELS:
        raise ProtocolError(BAD_TOPIC, f"topic {name!r} has channel {channel!r}, not one of {CHANNELS}")
    return ParsedTopic(prefix, device, channel)
