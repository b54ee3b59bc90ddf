"""The energy and money model of a decision, in the units the bundle gives.

Costs come from ``protocol.costs`` (the one cost definition): sensors from the bundle's
``SensorSpec``s, the link (radio energy per byte sent and received, bytes, round trip,
cloud price per call) from its ``LinkSpec``, which a scenario may override. On top of that
the device draws ``idle_mw`` while it waits. Results are cached per (sensors read, escalated),
so the model costs a dict lookup per decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from adaptedge.protocol.costs import decision_cost
from adaptedge.protocol.manifest import Manifest


@dataclass(frozen=True, slots=True)
class EnergyConfig:
    """Overrides of the bundle's link costs (None keeps the bundle's value) and idle power."""

    idle_mw: float = 0.0
    tx_mj_per_byte: float | None = None
    rx_mj_per_byte: float | None = None
    cloud_cost_per_call: float | None = None
    request_bytes: int | None = None
    reply_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("idle_mw", "tx_mj_per_byte", "rx_mj_per_byte", "cloud_cost_per_call",
                     "request_bytes", "reply_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"energy.{name} must be >= 0, got {value}")


@dataclass(frozen=True, slots=True)
class DecisionCost:
    """One decision's cost split by where it is spent."""

    sensor_energy_mj: float
    sensor_latency_ms: float
    sensor_money: float
    link_energy_mj: float
    link_bytes: int
    link_latency_ms: float
    cloud_money: float
    cloud_calls: int
    scalar: float

    @property
    def energy_mj(self) -> float:
        return self.sensor_energy_mj + self.link_energy_mj

    @property
    def money(self) -> float:
        return self.sensor_money + self.cloud_money


def apply_overrides(manifest: Manifest, config: EnergyConfig) -> Manifest:
    """The manifest with the scenario's link cost overrides applied."""
    link = manifest.link
    changes: dict[str, float | int] = {}
    if config.tx_mj_per_byte is not None:
        changes["tx_energy_mj_per_byte"] = config.tx_mj_per_byte
    if config.rx_mj_per_byte is not None:
        changes["rx_energy_mj_per_byte"] = config.rx_mj_per_byte
    if config.cloud_cost_per_call is not None:
        changes["cloud_cost_per_call"] = config.cloud_cost_per_call
    if config.request_bytes is not None:
        changes["request_bytes"] = config.request_bytes
    if config.reply_bytes is not None:
        changes["reply_bytes"] = config.reply_bytes
    if not changes:
        return manifest
    return replace(manifest, link=replace(link, **changes))  # type: ignore[arg-type]


class EnergyModel:
    """``cost(sensors_read, sent)`` -> ``DecisionCost``; ``idle_mj(seconds)``.

    ``sent``: a request went out (the link and the cloud call are paid), as in
    ``protocol.costs.decision_cost(..., escalated=sent)`` and the edge runtime's own cost.
    """

    def __init__(self, manifest: Manifest, config: EnergyConfig | None = None) -> None:
        self.config = config or EnergyConfig()
        self.manifest = apply_overrides(manifest, self.config)
        self._cache: dict[tuple[frozenset[str], bool], DecisionCost] = {}

    def cost(self, sensors_read: Iterable[str], escalated: bool) -> DecisionCost:
        key = (frozenset(sensors_read), bool(escalated))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        sensors = decision_cost(self.manifest, key[0], escalated=False)
        total = decision_cost(self.manifest, key[0], escalated=key[1])
        link = self.manifest.link
        result = DecisionCost(
            sensor_energy_mj=sensors.energy_mj,
            sensor_latency_ms=sensors.latency_ms,
            sensor_money=sensors.money,
            link_energy_mj=total.energy_mj - sensors.energy_mj,
            link_bytes=total.bytes - sensors.bytes,
            link_latency_ms=total.latency_ms - sensors.latency_ms,
            cloud_money=link.cloud_cost_per_call if key[1] else 0.0,
            cloud_calls=1 if key[1] else 0,
            scalar=total.scalar,
        )
        self._cache[key] = result
        return result

    def idle_mj(self, seconds: float) -> float:
        return self.config.idle_mw * seconds
