"""What one decision costs, in real units and as the training scalar. One definition for all.

A decision reads the union of the sensors of the nodes it visits; escalating also reads the
HPC's sensors not read yet and pays the link (bytes, radio energy, round trip, price/call).
``decision_costs`` is the same rule for a batch of decisions (every walk uses it). A node
whose model has an evaluation cost (``PolicyNode.compute``, e.g. a node scoring boosted
trees) adds it once per visit (``compute_cost``; ``visit_costs`` for a walk's node ids):
sensors are read once per decision, models are run once per node visited.

A sensor's cost may grow with the item's size n (``SensorSpec.size_poly``): pass ``size`` /
``sizes`` and each item is charged its own cost; without them the plain fields (the cost at
the training data's median size) apply, as for every constant-cost sensor.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.manifest import CostWeights, LinkSpec, Manifest, SensorSpec
from adaptedge.protocol.policy_graph import ComputeCost, PolicyGraph


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


def sensor_cost(sensor: SensorSpec, weights: CostWeights, size: float | None = None
                ) -> CostBreakdown:
    """What one read costs (at the item's ``size`` when its cost grows with the size)."""
    if size is not None and sensor.size_poly:
        row = size_polynomials([sensor], weights) @ _powers(np.array([float(size)]),
                                                             _degree([sensor]))[0]
        return CostBreakdown(energy_mj=float(row[0, 1]), latency_ms=float(row[0, 2]),
                             money=float(row[0, 3]), scalar=float(row[0, 0]))
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


def decision_cost(manifest: Manifest, sensors_read: Iterable[str], escalated: bool,
                  size: float | None = None) -> CostBreakdown:
    """Cost of a decision that read ``sensors_read`` (escalation's HPC sensors included),
    for an item of ``size`` when costs grow with the size."""
    total = CostBreakdown()
    for name in set(sensors_read):
        total = total + sensor_cost(manifest.sensor(name), manifest.cost_weights, size)
    if escalated:
        total = total + link_cost(manifest.link, manifest.cost_weights)
    return total


def compute_cost(compute: ComputeCost | None, weights: CostWeights) -> CostBreakdown:
    """What one evaluation of a node's model costs (nothing without a ``compute``); the
    scalar folds energy and latency as for a sensor and counts ``units`` like features."""
    if compute is None:
        return CostBreakdown()
    return CostBreakdown(energy_mj=compute.energy_mj, latency_ms=compute.latency_ms,
                         scalar=weights.energy_mj * compute.energy_mj
                         + weights.latency_ms * compute.latency_ms
                         + weights.uniform * compute.units)


def visit_costs(graph: PolicyGraph, weights: CostWeights) -> dict[str, CostBreakdown]:
    """Node id -> the evaluation cost a visit pays, for the nodes that have one (empty for a
    graph whose nodes have none: its decisions cost what they did before)."""
    return {nid: compute_cost(node.compute, weights) for nid, node in graph.nodes.items()
            if node.compute is not None}


def hpc_cost(manifest: Manifest) -> CostBreakdown:
    """Always-cloud: read every sensor the HPC needs and pay the link on every input."""
    return decision_cost(manifest, manifest.hpc.sensors, escalated=True)


def decision_costs(read_mask: npt.ArrayLike, escalated: npt.ArrayLike,
                   sensor_costs: npt.ArrayLike, link_cost: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``decision_cost`` for a batch: each row pays every sensor it read once, plus the link
    when it escalated.

    ``read_mask`` [N, S] (escalation's HPC sensors included), ``escalated`` [N];
    ``sensor_costs`` [S] and ``link_cost`` a number give [N]; ``sensor_costs`` [S, K] and
    ``link_cost`` [K] (e.g. ``cost_columns``) give [N, K]; per-item costs ``sensor_costs``
    [N, S, K] (``cost_columns(..., sizes=)``) give [N, K].
    """
    read = np.asarray(read_mask, dtype=np.float64)
    per_sensor = np.asarray(sensor_costs, dtype=np.float64)
    link = np.asarray(link_cost, dtype=np.float64)
    esc = np.asarray(escalated, dtype=np.float64)
    if per_sensor.ndim >= 2:
        esc = esc[:, None]
    if per_sensor.ndim == 3:
        out: npt.NDArray[np.float64] = np.einsum("ns,nsk->nk", read, per_sensor) + esc * link
        return out
    out = read @ per_sensor + esc * link
    return out


COST_COLUMNS = ("scalar", "energy_mj", "latency_ms", "money", "bytes")
"""The columns of ``cost_columns``: what ``decision_costs`` adds up per row."""


def cost_row(c: CostBreakdown) -> list[float]:
    """``c`` in ``COST_COLUMNS`` order."""
    return [c.scalar, c.energy_mj, c.latency_ms, c.money, float(c.bytes)]


def visit_columns(graph: PolicyGraph, weights: CostWeights) -> dict[str, npt.NDArray[np.float64]]:
    """``visit_costs`` as [5] rows in ``COST_COLUMNS`` order (for batched walks)."""
    return {nid: np.array(cost_row(c), dtype=np.float64)
            for nid, c in visit_costs(graph, weights).items()}


def cost_columns(sensors: Sequence[SensorSpec], link: LinkSpec, weights: CostWeights,
                 sizes: npt.ArrayLike | None = None
                 ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per-sensor [S, 5] and link [5] costs in ``COST_COLUMNS`` order, for ``decision_costs``;
    with ``sizes`` [N] the per-sensor costs are each item's own, [N, S, 5]."""
    link_row = np.array(cost_row(link_cost(link, weights)), dtype=np.float64)
    if sizes is not None:
        return at_sizes(size_polynomials(sensors, weights), sizes), link_row
    per_sensor = np.array([cost_row(sensor_cost(s, weights)) for s in sensors],
                          dtype=np.float64).reshape(len(sensors), len(COST_COLUMNS))
    return per_sensor, link_row


def check_sizes(sizes: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Item sizes as float64 [N]; raises ``ValueError`` unless finite and >= 0."""
    n = np.asarray(sizes, dtype=np.float64).reshape(-1)
    if not np.isfinite(n).all() or (n < 0).any():
        raise ValueError("item sizes must be finite numbers >= 0")
    return n


def at_sizes(poly: npt.ArrayLike, sizes: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Polynomials ``poly`` [..., D] (coefficients c0..c_{D-1}) at each size: [N, ...]."""
    p = np.asarray(poly, dtype=np.float64)
    out: npt.NDArray[np.float64] = np.einsum("...d,nd->n...", p,
                                             _powers(check_sizes(sizes), p.shape[-1]))
    return out


def _degree(sensors: Sequence[SensorSpec]) -> int:
    return max([1] + [len(c) for s in sensors for _, c in s.size_poly])


def _powers(sizes: npt.NDArray[np.float64], degree: int) -> npt.NDArray[np.float64]:
    """[N, D]: 1, n, n^2, ... per item."""
    return sizes[:, None] ** np.arange(degree, dtype=np.float64)[None, :]


def size_polynomials(sensors: Sequence[SensorSpec], weights: CostWeights
                     ) -> npt.NDArray[np.float64]:
    """[S, 5, D]: each sensor's cost in ``COST_COLUMNS`` order as polynomial coefficients in
    the item's size (a constant-cost unit has only c0; the scalar folds ``weights`` in)."""
    degree = _degree(sensors)
    out = np.zeros((len(sensors), len(COST_COLUMNS), degree), dtype=np.float64)
    for i, s in enumerate(sensors):
        out[i, 1, 0], out[i, 2, 0], out[i, 3, 0] = s.energy_mj, s.latency_ms, s.money
        for unit, coeffs in s.size_poly:
            k = COST_COLUMNS.index(unit)
            out[i, k, :] = 0.0
            out[i, k, :len(coeffs)] = coeffs
        out[i, 0] = (weights.energy_mj * out[i, 1] + weights.latency_ms * out[i, 2]
                     + weights.money * out[i, 3])
        out[i, 0, 0] += weights.uniform * len(s.features)
    return out
