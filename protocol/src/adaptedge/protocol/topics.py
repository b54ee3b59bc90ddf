"""MQTT topic names: ``<prefix>/v1/<device>/{req,resp,telemetry}`` (and the over-the-air
``update``, ``fetch``, ``chunk``: ``protocol.ota``; the store-and-forward ``store``, device to
cloud, and ``stored``, the cloud's acknowledgement once a record is durably stored:
``protocol.store_wire``) and the shared-subscription form.

A request names its bundle in one more segment, ``<prefix>/v1/<device>/req/<bundle>``
(``bundle_segment``), so the broker hands it only to workers that serve that bundle; the
plain ``.../req`` of older devices stays valid (workers forward what they do not
serve to the bundle's topic)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from adaptedge.protocol.errors import BAD_TOPIC, ProtocolError

TOPIC_VERSION = "v1"
DEFAULT_PREFIX = "adaptedge"
Channel = Literal["req", "resp", "telemetry", "update", "fetch", "chunk", "store", "stored"]
CHANNELS: tuple[Channel, ...] = ("req", "resp", "telemetry", "update", "fetch", "chunk", "store",
                                 "stored")
_FORBIDDEN = ("/", "+", "#", "\x00")
_PLAIN_BUNDLE = re.compile(r"[A-Za-z0-9_-]{1,64}")


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


@lru_cache(maxsize=1024)
def bundle_segment(bundle_id: str) -> str:
    """The topic segment that names a bundle: the id itself when it is 1-64 letters, digits,
    '-' or '_', else ``~`` and 20 hex digits of its SHA-256 (a '.', a space or a '/' is no
    valid segment on every broker: a NATS subject token takes neither '.' nor ' ')."""
    if _PLAIN_BUNDLE.fullmatch(bundle_id):
        return bundle_id
    return "~" + hashlib.sha256(bundle_id.encode()).hexdigest()[:20]


def request_topic(device: str, prefix: str = DEFAULT_PREFIX, bundle_id: str | None = None) -> str:
    """A device's request topic; with ``bundle_id`` the bundle-scoped one
    ``<prefix>/v1/<device>/req/<bundle_segment(bundle_id)>`` devices publish on."""
    name = topic(device, "req", prefix)
    return name if bundle_id is None else f"{name}/{bundle_segment(bundle_id)}"


def bundle_requests(bundle_id: str, prefix: str = DEFAULT_PREFIX) -> str:
    """Every device's requests for one bundle: ``<prefix>/v1/+/req/<bundle segment>``."""
    return f"{wildcard('req', prefix)}/{bundle_segment(bundle_id)}"


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
    bundle: str | None = None
    """A bundle-scoped request topic's last segment (``bundle_segment``), else None."""


def parse(name: str, prefix: str = DEFAULT_PREFIX) -> ParsedTopic:
    """Split a concrete topic into prefix, device and channel; ``ProtocolError`` if it is not ours."""
    head = f"{prefix}/{TOPIC_VERSION}/"
    if not name.startswith(head):
        raise ProtocolError(BAD_TOPIC, f"topic {name!r} does not start with {head!r}")
    rest = name[len(head) :].split("/")
    bundle = rest.pop() if len(rest) == 3 and rest[1] == "req" else None
    if len(rest) != 2:
        raise ProtocolError(BAD_TOPIC, f"topic {name!r} is not {head}<device>/<channel> "
                            "(or .../req/<bundle>)")
    device, channel = rest
    _check_segment("device id", device)
    if bundle is not None:
        _check_segment("bundle segment", bundle)
    if channel not in CHANNELS:
        raise ProtocolError(BAD_TOPIC, f"topic {name!r} has channel {channel!r}, not one of {CHANNELS}")
    return ParsedTopic(prefix, device, channel, bundle)
