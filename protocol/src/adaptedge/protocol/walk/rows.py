"""The per-row driver of the walk (``step``): one decision from the root to a stop or an
escalation, sans-IO. The caller runs each node's model (``RunNode``) and, on live sensors,
reads them (``ReadSensor``); the edge runtime drives its decisions with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.walk.graph import MOVE, WalkAction, WalkNode
from adaptedge.protocol.walk.step import step

M = TypeVar("M")
V = TypeVar("V")
Scores = npt.NDArray[np.floating[Any]]
RunNode = Callable[[WalkNode[M], V], Scores]
"""(node, the decision's feature values) -> the node model's ``action_scores`` row."""
ReadSensor = Callable[[int], str | None]
"""Reads sensor ``i`` into the decision's feature values; returns None, or why it failed."""


class Trail:
    """What one decision has done so far: sensors read (bits and order), failures, nodes."""

    __slots__ = ("failed", "failed_bits", "names", "nodes", "order", "read_bits")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.read_bits = 0
        self.failed_bits = 0
        self.order: list[str] = []
        """Names of the sensors read, in the order read."""
        self.failed: dict[str, str] = {}
        self.nodes: list[str] = []

    def read(self, sensors: Sequence[int], read: ReadSensor | None, *,
             stop_at_failure: bool) -> bool:
        """Read ``sensors`` not read or failed yet, in order (``read`` None: a replayed row,
        every read succeeds). True when none failed."""
        ok = True
        for s in sensors:
            bit = 1 << s
            if (self.read_bits | self.failed_bits) & bit:
                continue
            why = None if read is None else read(s)
            if why is None:
                self.read_bits |= bit
                self.order.append(self.names[s])
                continue
            self.failed[self.names[s]] = why
            self.failed_bits |= bit
            ok = False
            if stop_at_failure:
                break
        return ok


def walk_row(root: WalkNode[M], values: V, run: RunNode[M, V], names: tuple[str, ...]
             ) -> tuple[WalkNode[M], WalkAction[M], Trail]:
    """The walk on a fully measured row (every read succeeds, so no step can fail): the final
    node, the action taken there (stop or escalate) and the trail."""
    node = root
    trail = Trail(names)
    order, nodes = trail.order, trail.nodes
    order.extend(node.sensor_names)
    while True:
        nodes.append(node.id)
        scores = run(node, values)
        # ``step.best``, inlined: the device's hot path saves a call per node.
        action = node.actions[0] if node.single else node.actions[int(scores.argmax())]
        if action.kind != MOVE:
            break
        order.extend(action.new_sensor_names)
        node = action.next  # type: ignore[assignment]  # a move has a next node
    trail.read_bits = node.sensor_bits
    return node, action, trail


def walk_live(root: WalkNode[M], values: V, run: RunNode[M, V], read: ReadSensor,
              names: tuple[str, ...]) -> tuple[WalkNode[M], WalkAction[M] | None, Trail]:
    """The walk on live sensors (``read`` fills ``values``): a failed read leaves the walk
    where it is (``step``); the action is None when nothing was possible."""
    node = root
    trail = Trail(names)
    # The root model runs with failed columns at 0: its scores are not trusted then.
    trusted = trail.read(node.sensors, read, stop_at_failure=False)
    while True:
        trail.nodes.append(node.id)
        scores = run(node, values)
        while True:
            action, sensors = step(node, scores, trail.read_bits, trail.failed_bits, trusted)
            if action is None or action.kind != MOVE:
                return node, action, trail
            if trail.read(sensors, read, stop_at_failure=True):
                break
        assert action.next is not None
        node = action.next
