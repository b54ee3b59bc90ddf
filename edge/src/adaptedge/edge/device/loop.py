"""The replay loop: each row offered to the runtime as live sensors, at a rate, the decision
journaled, telemetry published on schedule."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from adaptedge.edge.device.background_drain import Counters
from adaptedge.edge.device.loading import Runtime
from adaptedge.edge.device.options import DeviceOptions
from adaptedge.edge.device.records import decision_record, telemetry
from adaptedge.edge.device.rows import ReplayRows, RowSensors
from adaptedge.edge.device.run_log import RunLog

if TYPE_CHECKING:
    from adaptedge.edge.mqtt_uplink import MqttUplink

LOUD_ERRORS = {
    "unknown_bundle": "the cloud does not serve this bundle: escalations answer unknown_bundle "
                      "and degrade; run cloud serve with the same bundle",
    "bad_topic": "the cloud refused the request topic: check --device and --prefix against "
                 "cloud serve --prefix and the broker ACL",
}
"""Cloud errors that repeat for every escalation until someone fixes the set-up."""


def replay(rt: Runtime, uplink: MqttUplink | None, rows: ReplayRows, options: DeviceOptions,
           log: RunLog, stop: threading.Event, counters: Counters,
           say: Callable[[str], None]) -> None:
    """Decide every row of ``rows`` (until ``stop`` is set), at ``options.rate_hz`` when given.

    Each decision is a ``decision`` line of ``log``; every ``options.telemetry_every_s`` a
    ``counters`` line, and the counters with latency percentiles go out as telemetry. A cloud
    error of ``LOUD_ERRORS`` is said once, at its first row."""
    sensors = RowSensors(rt.manifest)
    started = time.monotonic()
    warned: set[str] = set()
    every = options.telemetry_every_s
    next_telemetry = started + every if every > 0 else math.inf
    for i in range(len(rows)):
        if stop.is_set():
            break
        if options.rate_hz:
            wait = started + i / options.rate_hz - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        sensors.show(rows.X[i])
        d = rt.predict(sensors.readers, size=rows.size(i))
        if d.error in LOUD_ERRORS and d.error not in warned:
            warned.add(d.error)
            say(f"warning: {LOUD_ERRORS[d.error]} (first at row {i})")
        log.latencies.append(d.timings["total"] * 1000.0)
        log.write("decision", decision_record(i, d, rows.truth[i], time.monotonic() - started))
        if time.monotonic() >= next_telemetry:
            now = counters()
            log.write("counters", {"counters": now})
            if uplink is not None:
                uplink.publish_telemetry(telemetry(now, log.latencies))
            next_telemetry = time.monotonic() + every
