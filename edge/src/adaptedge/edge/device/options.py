"""``DeviceOptions``: how a device runs a bundle, as one typed object (``edge run``'s options)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from adaptedge.edge.errors import DeviceError
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.protocol.topics import DEFAULT_PREFIX


@dataclass(frozen=True)
class DeviceOptions:
    bundle: Path
    """The bundle directory or ``.tar`` to run."""
    device: str = "edge"
    """The device id (a topic segment)."""
    prefix: str = DEFAULT_PREFIX
    """The topic prefix, as the cloud's."""
    trust: tuple[Path, ...] = ()
    """Public keys: when given, only a bundle signed by one of them loads."""
    operating_point: str | float | None = None
    """A point's name, a budget (the most accurate point costing at most it), or the default."""
    sensor_timeout_ms: float | None = None
    """The timeout of every sensor the bundle gives none (None: the runtime's default)."""
    outbox: Path | None = None
    """Where escalated inputs (and audits) are kept for the cloud's store."""
    audit: AuditPolicy | None = None
    """Which locally answered decisions also read the HPC's sensors (with an outbox)."""
    rate_hz: float | None = None
    """Rows a second (None: as fast as possible)."""
    telemetry_every_s: float = 10.0
    """Publish telemetry every this many seconds (0: only at the end)."""
    connect_timeout_s: float = 10.0
    """Wait this long for the broker before starting (then run degraded until it answers)."""
    drain: bool = True
    """With an outbox and an uplink: forward the outbox in the background."""
    drain_rate_per_s: float = 50.0
    drain_wait_s: float = 5.0
    """At the end of the rows, wait this long for the outbox to be forwarded."""
    follow_updates: bool = False
    """Take signed bundle updates announced over the uplink (needs ``trust``)."""
    updates_dir: Path | None = None
    """Where updates are downloaded and kept (None: ./adaptedge-updates/<device>)."""

    def __post_init__(self) -> None:
        if self.rate_hz is not None and not (self.rate_hz > 0 and math.isfinite(self.rate_hz)):
            raise DeviceError(f"--rate must be a positive number, got {self.rate_hz}")

    @property
    def sensor_timeouts_ms(self) -> dict[str, float] | None:
        """``EdgeRuntime.load``'s ``sensor_timeouts_ms`` for ``sensor_timeout_ms``."""
        return None if self.sensor_timeout_ms is None else {"*": self.sensor_timeout_ms}

    @property
    def slots_dir(self) -> Path:
        return self.updates_dir or Path("adaptedge-updates") / self.device
