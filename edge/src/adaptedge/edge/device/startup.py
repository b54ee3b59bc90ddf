"""Starting a device: its bundle loaded and checked against the rows, its uplink connected,
updates followed when asked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adaptedge.edge.device.follow import Say, follow_updates
from adaptedge.edge.device.loading import Runtime, load_runtime
from adaptedge.edge.device.options import DeviceOptions
from adaptedge.edge.device.rows import ReplayRows
from adaptedge.edge.outbox import Outbox

if TYPE_CHECKING:
    from adaptedge.edge.mqtt_uplink import MqttUplink


def start_runtime(options: DeviceOptions, uplink: MqttUplink | None, rows: ReplayRows,
                  say: Say) -> Runtime:
    """The runtime of ``options.bundle``, checked against ``rows``, with ``uplink`` (None:
    offline) started. A broker that does not answer within ``options.connect_timeout_s`` is
    a warning: escalations answer degraded until it does. On an error the runtime and the
    uplink are closed."""
    outbox = Outbox(options.outbox) if options.outbox else None
    rt = load_runtime(options.bundle, options, uplink, outbox,
                      operating_point=options.operating_point)
    try:
        rows.check(rt.manifest)
        if uplink is not None:
            uplink.start()
            if not uplink.wait_connected(options.connect_timeout_s):
                say(f"warning: not connected to the broker after "
                    f"{options.connect_timeout_s:g} s ({uplink.last_error}); escalations "
                    "answer degraded until it is reachable")
        return follow_updates(rt, uplink, options, say)
    except BaseException:
        rt.close()
        if uplink is not None:
            uplink.close()
        raise
