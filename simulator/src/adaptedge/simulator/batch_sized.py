"""Per-item costs for the batched replay of a size-dependent bundle (``protocol.costs`` with a
size): each row pays the sensors it read at its own item size.

The per-row replay charges a decision ``decision_cost(manifest, read sensors, sent, size)``
(the runtime's ``edge.sized.sized_cost``) and counts its read latency as the sum, in reading
order, of each sensor's latency at that size. Floating-point sums depend on their order, so
this computes both with those very calls, once per distinct (sensors read and sent, size)
pair, and spreads them over the rows: the same numbers to the last bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.costs import decision_cost, sensor_cost
from adaptedge.protocol.manifest import Manifest

F64 = npt.NDArray[np.float64]


def sized_costs(manifest: Manifest, sensors: npt.NDArray[np.object_],
                keys: npt.NDArray[np.int64], inverse: npt.NDArray[np.int64], sizes: F64
                ) -> tuple[F64, F64]:
    """Per row: read latency (ms) and energy (mJ) at the row's size. ``sensors[k]``: the
    sensors of cost key ``keys[k]`` (``trail * 2 + sent``) in reading order; ``inverse``:
    each row's key slot."""
    names = [s.name for s in manifest.sensors]
    weights = manifest.cost_weights
    specs = {s.name: s for s in manifest.sensors}
    cache: dict[tuple[int, float], tuple[float, float]] = {}
    read_ms, energy = np.empty(len(inverse)), np.empty(len(inverse))
    sent = (keys & 1).astype(bool).tolist()
    for i, pair in enumerate(zip(inverse.tolist(), sizes.tolist(), strict=True)):
        hit = cache.get(pair)
        if hit is None:
            slot, size = pair
            order: Any = sensors[slot]
            held = set(order)
            latency = sum(sensor_cost(specs[s], weights, size).latency_ms for s in order)
            cost = decision_cost(manifest, [n for n in names if n in held], sent[slot], size)
            hit = cache[pair] = (latency, cost.energy_mj)
        read_ms[i], energy[i] = hit
    return read_ms, energy
