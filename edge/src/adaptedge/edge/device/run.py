"""A device's run from its first line to its summary: replay, drain, last telemetry, close."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adaptedge.edge.device.background_drain import device_counters, finish_drain, start_drain
from adaptedge.edge.device.loading import Runtime
from adaptedge.edge.device.loop import replay
from adaptedge.edge.device.options import DeviceOptions
from adaptedge.edge.device.records import telemetry
from adaptedge.edge.device.rows import ReplayRows
from adaptedge.edge.device.run_log import RunLog
from adaptedge.edge.journal import summarize

if TYPE_CHECKING:
    from adaptedge.edge.mqtt_uplink import MqttUplink

LAST_TELEMETRY_S = 0.05
"""How long the last telemetry is given to leave before the uplink closes."""


@dataclass(frozen=True)
class DeviceRun:
    summary: dict[str, Any]
    """``edge.journal.summarize`` of the run's lines (``interrupted`` when ``stop`` was set)."""
    counters: dict[str, float]
    """The runtime's final counters (with a background drain, its backlog too)."""


def run_device(rt: Runtime, uplink: MqttUplink | None, rows: ReplayRows,
               options: DeviceOptions, log: RunLog, stop: threading.Event,
               say: Callable[[str], None]) -> DeviceRun:
    """Replay ``rows`` through ``rt`` until they end or ``stop`` is set; then let the outbox
    drain, publish the last telemetry, close the uplink and ``rt``, and write the final
    ``counters`` and ``summary`` lines to ``log`` (which the caller closes)."""
    log.write("start", {"device": options.device, "bundle_id": rt.manifest.bundle_id,
                        "operating_point": rt.operating_point, "replay": rows.source,
                        "split": rows.split, "rows": len(rows), "started_at": time.time()})
    drainer = start_drain(rt, uplink, options)
    read = device_counters(rt, drainer)
    try:
        replay(rt, uplink, rows, options, log, stop, read, say)
    finally:
        finish_drain(drainer, options, stop.is_set())
        if uplink is not None:
            uplink.publish_telemetry(telemetry(read(), log.latencies))
            time.sleep(LAST_TELEMETRY_S)
            uplink.close()
        rt.close()
    counters = read()
    log.write("counters", {"counters": counters})
    summary = summarize(log.lines)
    summary["interrupted"] = stop.is_set()
    log.write("summary", summary)
    return DeviceRun(summary, counters)
