"""What one decision costs, in real units and as the training scalar. One definition for all.

A decision reads the union of the sensors of the nodes it visits; escalating also reads the
HPC's sensors not read yet and pays the link (bytes, radio energy, round trip, price/call).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from adaptedge.protocol.manifest import CostWeights, LinkSpec, Manifest, SensorSpec


@dataclass(frozen=True, slots=True)
class CostBreakdown:
    energy_mj: float = 0.0
    latency_ms: float = 0.0
    money: float = 0.0
    bytes: int = 0
    scalar: float = 0.0
    """The training cost (``Manifest.cost_weights`` applied)."""

    def __add__(self, other: CostBreakdown) -> CostBreakdown:
        return CostBreakdown(
            self.energy_mj + other.energy_mj,
            self.latency_ms + other.latency_ms,
            self.money + other.money,
            self.bytes + other.bytes,
            self.scalar + other.scalar,
        )


def sensor_cost(sensor: SensorSpec, weights: CostWeights) -> CostBreakdown:
    return CostBreakdown(
        energy_mj=sensor.energy_mj,
        latency_ms=sensor.latency_ms,
        money=sensor.money,
        scalar=weights.sensor_cost(sensor),
    )


def link_cost(link: LinkSpec, weights: CostWeights) -> CostBreakdown:
    return CostBreakdown(
        energy_mj=link.request_bytes * link.tx_energy_mj_per_byte
        + link.reply_bytes * link.rx_energy_mj_per_byte,
        latency_ms=link.rtt_ms,
        money=link.cloud_cost_per_call,
        bytes=link.request_bytes + link.reply_bytes,
        scalar=weights.link_cost(link),
    )


def decision_cost(manifest: Manifest, sensors_read: Iterable[str], escalated: bool) -> CostBreakdown:
    """Cost of a decision that read ``sensors_read`` (escalation's HPC sensors included)."""
    total = CostBreakdown()
    for name in set(sensors_read):
        total = total + sensor_cost(manifest.sensor(name), manifest.cost_weights)
    if escalated:
        total = total + link_cost(manifest.link, manifest.cost_weights)
    return total


def hpc_cost(manifest: Manifest) -> CostBreakdown:
    """Always-cloud: read every sensor the HPC needs and pay the link on every input."""
    return decision_cost(manifest, manifest.hpc.sensors, escalated=True)
