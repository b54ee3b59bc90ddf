"""A device's run: a bundle's runtime fed row after row as live sensors, journaled, with its
outbox drained and its updates followed in the background (``adaptedge edge run``'s loop).

``start_runtime(options, uplink, rows, say)`` loads the bundle as ``DeviceOptions`` says (and
with ``follow_updates`` wraps it to take signed updates); ``run_device(rt, uplink, rows,
options, log, stop, say)`` replays ``ReplayRows`` until they end or ``stop`` is set, then
drains, reports and closes, returning the summary. ``say`` receives the run's notes
(``warning: ...``) for the caller to print; nothing here prints or parses a command line.
"""

from __future__ import annotations

from adaptedge.edge.device.loading import Runtime
from adaptedge.edge.device.options import DeviceOptions
from adaptedge.edge.device.rows import ReplayRows
from adaptedge.edge.device.run import DeviceRun, run_device
from adaptedge.edge.device.run_log import RunLog
from adaptedge.edge.device.startup import start_runtime

__all__ = [
    "DeviceOptions",
    "DeviceRun",
    "ReplayRows",
    "RunLog",
    "Runtime",
    "run_device",
    "start_runtime",
]
