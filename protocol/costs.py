"""What one decision costs, in real units and as the training scalar. One definition for all.

A decision reads the union of the sensors of the nodes it visits; escalating also reads the
HPC's sensors not read yet and pays the link (bytes, radio energy, round trip, price/call).
``decision_costs`` is the same rule for a batch of decisions (every walk uses it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

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


def decision_costs(read_mask: npt.ArrayLike, escalated: npt.ArrayLike,
                   sensor_costs: npt.ArrayLike, link_cost: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``decision_cost`` for a batch: each row pays every sensor it read once, plus the link
    when it escalated.

    ``read_mask`` [N, S] (escalation's HPC sensors included), ``escalated`` [N];
    ``sensor_costs`` [S] and ``link_cost`` a number give [N]; ``sensor_costs`` [S, K] and
    ``link_cost`` [K] (e.g. ``cost_columns``) give [N, K].
    """
    read = np.asarray(read_mask, dtype=np.float64)
    per_sensor = np.asarray(sensor_costs, dtype=np.float64)
    link = np.asarray(link_cost, dtype=np.float64)
    esc = np.asarray(escalated, dtype=np.float64)
    if per_sensor.ndim == 2:
        esc = esc[:, None]
    out: npt.NDArray[np.float64] = read @ per_sensor + esc * link
    return out


COST_COLUMNS = ("scalar", "energy_mj", "latency_ms", "money", "bytes")
"""The columns of ``cost_columns``: what ``decision_costs`` adds up per row."""


def cost_columns(sensors: Sequence[SensorSpec], link: LinkSpec, weights: CostWeights
                 ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per-sensor [S, 5] and link [5] costs in ``COST_COLUMNS`` order, for ``decision_costs``."""

    def row(c: CostBreakdown) -> list[float]:
        return [c.scalar, c.energy_mj, c.latency_ms, c.money, float(c.bytes)]

    per_sensor = np.array([row(sensor_cost(s, weights)) for s in sensors],
                          dtype=np.float64).reshape(len(sensors), len(COST_COLUMNS))
    return per_sensor, np.array(row(link_cost(link, weights)), dtype=np.float64)
