"""Where each device of a rollout stands, read from the broker.

Announcements are retained on the devices' ``update`` topics and each device's latest
``UpdateStatus`` is retained on its ``telemetry`` topic, so one subscription to both wildcards
yields the state of the whole fleet at once (live updates follow). A status counts only when
its ``device`` is the device its topic names (the ACL lets a device write its own topic only).
A device with an announcement and no status newer than it is ``announced``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt

from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.ota import (
    ANNOUNCED,
    UpdateAnnouncement,
    UpdateStatus,
    decode_ota,
)
from adaptedge.protocol.topics import DEFAULT_PREFIX, parse, wildcard

SETTLED = frozenset(("active", "rolled_back", "refused"))


@dataclass(slots=True)
class DeviceRollout:
    """One device: what was announced to it and what it last said."""

    device: str
    announced: UpdateAnnouncement | None = None
    status: UpdateStatus | None = None

    @property
    def state(self) -> str:
        """The device's state about the announced bundle (or its own latest state)."""
        ann, status = self.announced, self.status
        if status is None:
            return ANNOUNCED if ann is not None else "unknown"
        if ann is not None and status.bundle_id != ann.bundle_id and \
                status.active_bundle_id != ann.bundle_id:
            return ANNOUNCED  # the device has not reacted to this announcement yet
        return status.state

    def row(self) -> dict[str, Any]:
        ann, status = self.announced, self.status
        return {
            "device": self.device,
            "state": self.state,
            "announced_bundle": ann.bundle_id if ann else "",
            "announced_version": ann.version if ann else None,
            "rollout": ann.rollout if ann else (status.rollout if status else ""),
            "active_bundle": status.active_bundle_id if status else "",
            "active_version": status.active_version if status else None,
            "previous_bundle": status.previous_bundle_id if status else "",
            "progress": status.progress if status else 0.0,
            "reason": status.reason if status else "",
            "updated_at": status.sent_at if status else None,
        }


class RolloutWatch:
    """Collects announcements and device statuses through ``client`` (connected elsewhere;
    call ``attach`` before its loop runs, and again after a reconnect)."""

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        self.prefix = prefix
        self.devices: dict[str, DeviceRollout] = {}
        self._lock = threading.Lock()
        self.changed = threading.Event()
        self.ignored = 0

    def attach(self, client: mqtt.Client) -> None:
        for channel in ("update", "telemetry"):
            flt = wildcard(channel, self.prefix)
            client.message_callback_add(flt, self.on_message)
            client.subscribe(flt, qos=1)

    def on_message(self, client: Any, userdata: Any, message: mqtt.MQTTMessage) -> None:
        self.accept(message.topic, bytes(message.payload))

    def accept(self, topic_name: str, payload: bytes) -> None:
        try:
            parsed = parse(topic_name, self.prefix)
        except ProtocolError:
            self.ignored += 1
            return
        if not payload:
            if parsed.channel == "update":  # a withdrawn announcement
                with self._lock:
                    if parsed.device in self.devices:
                        self.devices[parsed.device].announced = None
            return
        try:
            message = decode_ota(payload)
        except ProtocolError:
            return  # plain telemetry counters share the topic
        with self._lock:
            entry = self.devices.setdefault(parsed.device, DeviceRollout(parsed.device))
            if parsed.channel == "update" and type(message) is UpdateAnnouncement:
                entry.announced = message
            elif parsed.channel == "telemetry" and type(message) is UpdateStatus \
                    and message.device == parsed.device:
                if entry.status is None or message.sent_at >= entry.status.sent_at:
                    entry.status = message
            else:
                self.ignored += 1
                return
        self.changed.set()

    def rows(self, bundle_id: str | None = None) -> list[dict[str, Any]]:
        """One row per device (only those announced ``bundle_id`` when given), by name."""
        with self._lock:
            entries = sorted(self.devices.values(), key=lambda e: e.device)
            return [e.row() for e in entries if bundle_id is None
                    or (e.announced is not None and e.announced.bundle_id == bundle_id)]

    def wait_settled(self, devices: list[str], bundle_id: str, timeout_s: float) -> bool:
        """Wait until every device in ``devices`` is active on, refused or rolled back
        ``bundle_id``; False at the timeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                done = all(self._settled(d, bundle_id) for d in devices)
            if done:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.wait(min(left, 0.2))
            self.changed.clear()

    def _settled(self, device: str, bundle_id: str) -> bool:
        entry = self.devices.get(device)
        status = entry.status if entry is not None else None
        return status is not None and status.bundle_id == bundle_id and status.state in SETTLED


def render(rows: list[dict[str, Any]]) -> str:
    """A fixed-width table of ``RolloutWatch.rows``."""
    if not rows:
        return "no device has an announcement or an update status on this broker and prefix"
    head = f"{'device':<20} {'state':<12} {'announced':<26} {'active':<26} reason"
    lines = [head]
    for r in rows:
        announced = f"{r['announced_bundle']}@{r['announced_version']}" \
            if r["announced_bundle"] else "-"
        active = f"{r['active_bundle']}@{r['active_version']}" if r["active_bundle"] else "-"
        state = r["state"] + (f" {r['progress']:.0%}" if r["state"] == "downloading" else "")
        lines.append(f"{r['device']:<20} {state:<12} {announced:<26} {active:<26} "
                     f"{r['reason']}")
    return "\n".join(lines)
