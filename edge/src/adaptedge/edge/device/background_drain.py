"""The outbox forwarded during a run (``edge.drain``), and the counters a device reports with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from adaptedge.edge.device.loading import Runtime, inner_runtime
from adaptedge.edge.device.options import DeviceOptions
from adaptedge.edge.drain import OutboxDrainer

if TYPE_CHECKING:
    from adaptedge.edge.mqtt_uplink import MqttUplink

Counters = Callable[[], dict[str, float]]


def start_drain(rt: Runtime, uplink: MqttUplink | None,
                options: DeviceOptions) -> OutboxDrainer | None:
    """The background drain (None without an outbox, an uplink, or with ``drain`` off)."""
    outbox = inner_runtime(rt).outbox  # with updates followed: the active runtime's; one outbox
    if uplink is None or outbox is None or not options.drain:
        return None
    return OutboxDrainer(outbox, uplink, options.device, prefix=options.prefix,
                         rate_per_s=options.drain_rate_per_s).start()


def device_counters(rt: Runtime, drainer: OutboxDrainer | None) -> Counters:
    """What the device reports (summary, journal, telemetry): the runtime's counters and, with
    a background drain, its backlog (``outbox_records``, ``drain_in_flight``, ``drain_*``)."""
    def read() -> dict[str, float]:
        counters = rt.counters
        return counters if drainer is None else counters | drainer.counters
    return read


def finish_drain(drainer: OutboxDrainer | None, options: DeviceOptions,
                 interrupted: bool) -> None:
    """Let the drain forward what is left (not when interrupted), then stop it."""
    if drainer is None:
        return
    if not interrupted and options.drain_wait_s > 0:
        drainer.wait_idle(options.drain_wait_s)
    drainer.stop()
