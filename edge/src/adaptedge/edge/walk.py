"""The device walk as a sans-IO step: from a node, what was read and the node model's outputs
to the next action. Sensors, sessions and the uplink stay outside (``edge.runtime`` drives).

The rules: start at the root; entering a node reads its sensors not read yet, in listed order;
run the node model once; take the first highest ``action_scores`` entry (a node with one
action needs none). ``stop`` answers with the first argmax of the node's ``probabilities``;
a move (``acquire`` or ``route``) enters its next node; ``escalate`` reads the HPC's unread
sensors and asks the cloud (``edge.escalation``). A sensor that fails is not retried in that
decision: when entering a node fails the walk stays where it is and takes the best-ranked
action still possible (one whose target needs no failed sensor). When the root's own sensors
failed its scores are not trusted: the root escalates if it may, else nothing is possible.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from adaptedge.edge.policy import MOVE, CompiledAction, CompiledNode

F32 = npt.NDArray[np.float32]
ReadSensor = Callable[[int], str | None]
"""Reads sensor ``i`` into the decision's feature buffer; returns None, or why it failed."""


def best(node: CompiledNode, scores: F32) -> CompiledAction:
    """The first highest-scoring action at ``node`` (the walk when no sensor has failed)."""
    return node.actions[0] if node.single else node.actions[int(scores.argmax())]


def choose(node: CompiledNode, scores: F32, failed_bits: int = 0,
           scores_trusted: bool = True) -> CompiledAction | None:
    """The action the walk takes at ``node`` given its model's ``scores`` when the sensors in
    ``failed_bits`` failed this decision; None when no action is left (answer degraded)."""
    if not scores_trusted:
        return node.escalate
    action = best(node, scores)
    if not failed_bits or action.kind != MOVE or not _needs(action, failed_bits):
        return action
    ranked = np.argsort(-scores[:len(node.actions)].astype(np.float64), kind="stable")
    for i in ranked.tolist():  # ties keep listed order, as the first highest does
        action = node.actions[int(i)]
        if action.kind != MOVE or not _needs(action, failed_bits):
            return action
    return None


def _needs(action: CompiledAction, bits: int) -> bool:
    assert action.next is not None
    return bool(action.next.sensor_bits & bits)


def entering(action: CompiledAction, read_bits: int) -> tuple[int, ...]:
    """The sensors a move reads to enter its node when ``read_bits`` were read, in order."""
    assert action.next is not None
    return tuple(s for s in action.next.sensors if not read_bits >> s & 1)


def step(node: CompiledNode, scores: F32, read_bits: int, failed_bits: int = 0,
         scores_trusted: bool = True) -> tuple[CompiledAction | None, tuple[int, ...]]:
    """One step of the walk: the action taken at ``node`` and, for a move, the sensors to read
    (in order) to enter its node. ``(None, ())``: nothing possible."""
    action = choose(node, scores, failed_bits, scores_trusted)
    if action is None or action.kind != MOVE:
        return action, ()
    return action, entering(action, read_bits)


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
