"""The rules of the walk at one node, for one row (``step``) or many (``choose_rows``).

At a node the walk takes the first action whose score is within the node's tie band of the
best (band 0, what exported models use: the first highest score; a node with one action needs
no scores). ``stop`` answers with the first argmax of the node's probabilities (a regression
node: with its ``value``); a move
(``acquire`` or ``route``) enters its next node, reading that node's sensors not read yet in
its listed order; ``escalate`` asks the cloud after reading the HPC's unread sensors. A
sensor that fails is not retried in that decision: when entering a node fails, the walk stays
where it is and takes the best-ranked action still possible (one whose target needs no failed
sensor). When the root's own sensors failed its scores are not trusted: the root escalates if
it may, else nothing is possible.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.walk.graph import MOVE, WalkAction, WalkNode

M = TypeVar("M")
Scores = npt.NDArray[np.floating[Any]]
IntArray = npt.NDArray[np.int64]


def best(node: WalkNode[M], scores: Scores) -> WalkAction[M]:
    """The first highest-scoring action at ``node`` (the walk when no sensor has failed)."""
    return node.actions[0] if node.single else node.actions[int(scores.argmax())]


def choose(node: WalkNode[M], scores: Scores, failed_bits: int = 0,
           scores_trusted: bool = True) -> WalkAction[M] | None:
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


def _needs(action: WalkAction[M], bits: int) -> bool:
    assert action.next is not None
    return bool(action.next.sensor_bits & bits)


def entering(action: WalkAction[M], read_bits: int) -> tuple[int, ...]:
    """The sensors a move reads to enter its node when ``read_bits`` were read, in order."""
    assert action.next is not None
    return tuple(s for s in action.next.sensors if not read_bits >> s & 1)


def step(node: WalkNode[M], scores: Scores, read_bits: int, failed_bits: int = 0,
         scores_trusted: bool = True) -> tuple[WalkAction[M] | None, tuple[int, ...]]:
    """One step of the walk: the action taken at ``node`` and, for a move, the sensors to read
    (in order) to enter its node. ``(None, ())``: nothing possible."""
    action = choose(node, scores, failed_bits, scores_trusted)
    if action is None or action.kind != MOVE:
        return action, ()
    return action, entering(action, read_bits)


def choose_rows(scores: Scores, band: float = 0.0) -> IntArray:
    """``best`` on each row of ``scores`` [N, n_actions]: the first action within ``band`` of
    the row's best score (band 0: the first highest), computed in the scores' dtype."""
    if band <= 0:
        return np.asarray(scores.argmax(axis=1), dtype=np.int64)
    edge = scores.max(axis=1, keepdims=True) - band
    return np.asarray((scores >= edge).argmax(axis=1), dtype=np.int64)


def tie_margin(scores: Scores, band: float = 0.0) -> npt.NDArray[np.float64]:
    """How close each row's choice came to another: the least distance of a score from the
    tie band's edge (band 0: the gap between the two best scores)."""
    if band > 0:
        edge = scores.max(axis=1, keepdims=True) - band
        return np.asarray(np.abs(scores - edge).min(axis=1), dtype=np.float64)
    ranked = np.sort(scores, axis=1)
    return np.asarray(ranked[:, -1] - ranked[:, -2], dtype=np.float64)
