"""Loading a bundle as ``DeviceOptions`` say: the one ``EdgeRuntime.load`` call of a device."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from adaptedge.edge.device.options import DeviceOptions
from adaptedge.edge.outbox import Outbox
from adaptedge.edge.runtime import EdgeRuntime
from adaptedge.edge.switchable import SwitchableRuntime

if TYPE_CHECKING:
    from adaptedge.edge.mqtt_uplink import MqttUplink

Runtime = EdgeRuntime | SwitchableRuntime
"""What a device decides with: a runtime, or with updates followed, the one holding it."""


def load_runtime(root: Path, options: DeviceOptions, uplink: MqttUplink | None,
                 outbox: Outbox | None, *, operating_point: str | float | None) -> EdgeRuntime:
    """``root`` verified (against ``options.trust``) and loaded at ``operating_point``."""
    return EdgeRuntime.load(root, uplink=uplink, device_id=options.device,
                            trust=list(options.trust) or None, operating_point=operating_point,
                            sensor_timeouts_ms=options.sensor_timeouts_ms, outbox=outbox,
                            audit=options.audit)


def inner_runtime(rt: Runtime) -> EdgeRuntime:
    """The runtime deciding now (the one a ``SwitchableRuntime`` holds)."""
    return rt.runtime if isinstance(rt, SwitchableRuntime) else rt
