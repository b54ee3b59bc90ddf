"""The many-sensor lattice: the paper's DAG over unions of sensor subsets (§3.2), the subsets
cut as blocks from a gain order.

The paper treats each of t sensor subsets as one "sensor" and builds the DAG over all unions
of them (2^t nodes). Its Alg. 2 picks the subsets by the reward "some subset classifies the
example right", which saturates on binary tasks long before the subsets are strong enough to
match the HPC (issue 32: on digits-binary the deepest node of the track lattice held 14 of 64
pixels at 0.92 validation accuracy, against the HPC's 0.99, and 79% of rows escalated). Here the
subsets are consecutive blocks of one sensor order, best first by split gain per unit cost in a
small boosted model fitted to the labels and the HPC's out-of-fold probabilities
(``methods.baselines.sensor_gains``, the order the confidence cascade uses); block ends sit at
growing fractions of the all-sensor cost (``BLOCK_ENDS``), so the early blocks are small (cheap
stops) and the last ones let a hard example read every sensor locally. The DAG over their unions
lets a node read a later block before an earlier one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from adaptedge.trainer.methods.dag.graph import Lattice, union_lattice
from adaptedge.trainer.methods.dag.problem import DagProblem, SensorSet

WIDE_SENSORS = 24
"""Beyond this many sensors the default lattice is the block lattice (``lattice="auto"``)."""
BLOCK_ENDS: tuple[float, ...] = (1 / 16, 1 / 8, 3 / 16, 1 / 4, 1 / 2, 1.0)
"""Where blocks end, as fractions of the all-sensor cost along the order: six blocks, a
2^6 = 64-node lattice (64 pixels: blocks of 4, 4, 4, 4, 16 and 32)."""
QUICK_BLOCK_ENDS: tuple[float, ...] = (1 / 8, 1 / 4, 1 / 2, 1.0)


def gain_order(problem: DagProblem) -> list[int]:
    """Sensors best first by split gain per unit cost (ties: lower index first)."""
    from adaptedge.trainer.methods.baselines import sensor_gains

    train = problem.splits["train"]
    feature_sensor = np.zeros(train.X.shape[1], dtype=np.intp)
    for s, spec in enumerate(problem.sensors):
        feature_sensor[list(spec.features)] = s
    gains = sensor_gains(train.X, train.y, train.hpc_proba, feature_sensor)
    per_cost = gains / np.maximum(problem.sensor_costs, 1e-12)
    return [int(s) for s in np.argsort(-per_cost, kind="stable")]


def order_blocks(order: Sequence[int], costs: Sequence[float],
                 ends: Sequence[float] = BLOCK_ENDS) -> list[SensorSet]:
    """``order`` cut into consecutive non-empty blocks: block k ends at the first sensor whose
    cumulative cost reaches ``ends[k]`` of the total (the last block takes the rest)."""
    if not order:
        return []
    if any(not 0 < e <= 1 for e in ends) or list(ends) != sorted(ends):
        raise ValueError(f"block ends must rise within (0, 1], got {list(ends)}")
    cum = np.cumsum([float(costs[s]) for s in order])
    total = float(cum[-1]) if cum[-1] > 0 else 1.0
    cuts = sorted({min(int(np.searchsorted(cum / total, e - 1e-9)) + 1, len(order))
                   for e in ends} | {len(order)})
    blocks, start = [], 0
    for cut in cuts:
        if cut > start:
            blocks.append(tuple(sorted(order[start:cut])))
            start = cut
    return blocks


def block_lattice(problem: DagProblem, ends: Sequence[float] = BLOCK_ENDS
                  ) -> tuple[Lattice, list[SensorSet]]:
    """The DAG over every union of the gain order's blocks (root: no sensor), and the blocks."""
    blocks = order_blocks(gain_order(problem), problem.sensor_costs.tolist(), ends)
    return union_lattice(blocks), blocks
