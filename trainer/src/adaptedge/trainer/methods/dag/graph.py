"""The lattice Graph-Reduce trains on, and the linear node policies it trains.

A ``Lattice`` has one node per sensor set reachable from its root by unions of "units" (single
sensors for the exhaustive lattice, greedy subsets for many sensors, prefixes for a cascade).
Graph-Reduce trains one policy per lattice node (``UnitNode``); ``trainer.methods.dag.nodes`` turns
them into the trainer's one policy graph (``trainer.policy.graph.Graph``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, Protocol

import numpy as np

from adaptedge.trainer.methods.dag.problem import FloatArray, IntArray, SensorSet

Kind = Literal["stop", "acquire", "escalate"]
"""What Graph-Reduce trains: stop, acquire a bigger lattice node, escalate."""


@dataclass(frozen=True)
class Lattice:
    root: SensorSet
    edges: dict[SensorSet, tuple[SensorSet, ...]]
    """Node -> the bigger sensor sets one unit step reaches (every node is a key)."""

    @property
    def nodes(self) -> list[SensorSet]:
        """Biggest sets first: every edge points at a node listed earlier."""
        return sorted(self.edges, key=lambda s: (-len(s), s))


def _reachable(root: SensorSet, steps: Callable[[SensorSet], list[SensorSet]]) -> Lattice:
    """Breadth-first from ``root``: every node ``steps`` reaches, with its targets in order."""
    edges: dict[SensorSet, tuple[SensorSet, ...]] = {}
    queue = deque([tuple(sorted(root))])
    while queue:
        node = queue.popleft()
        if node in edges:
            continue
        edges[node] = tuple(steps(node))
        queue.extend(edges[node])
    return Lattice(tuple(sorted(root)), edges)


def union_lattice(units: Iterable[SensorSet], root: SensorSet = ()) -> Lattice:
    """All unions of ``units`` reachable from ``root`` (the paper's DAG over subsets)."""
    unit_sets = [frozenset(u) for u in units if u]

    def steps(node: SensorSet) -> list[SensorSet]:
        have = frozenset(node)
        return sorted({tuple(sorted(have | u)) for u in unit_sets if not u <= have},
                      key=lambda s: (len(s), s))

    return _reachable(root, steps)


def track_lattice(tracks: Sequence[Sequence[int]], root: SensorSet = ()) -> Lattice:
    """Single-sensor steps along ordered "tracks": from S, read the first sensor of any track
    that S does not hold yet. Greedy subsets in insertion order become tracks, so every
    prefix union is a node (at most prod(len(track) + 1) nodes) and no step reads two sensors.
    """
    def steps(node: SensorSet) -> list[SensorSet]:
        have = set(node)
        nxt = {next((s for s in track if s not in have), None) for track in tracks}
        return sorted(tuple(sorted((*node, s))) for s in nxt if s is not None)

    return _reachable(root, steps)


def track_lattice_size(tracks: Sequence[Sequence[int]]) -> int:
    return len(track_lattice(tracks).edges)


def exhaustive_lattice(n_sensors: int) -> Lattice:
    return track_lattice([(s,) for s in range(n_sensors)])


def chain_lattice(stages: Sequence[SensorSet]) -> Lattice:
    """A fixed-order cascade over nested sensor sets (``stages[0]`` is read on entry)."""
    sets = [tuple(sorted(s)) for s in stages]
    for small, big in pairwise(sets):
        if not set(small) < set(big):
            raise ValueError(f"cascade stages must grow strictly: {small} then {big}")
    edges: dict[SensorSet, tuple[SensorSet, ...]] = {p: (q,) for p, q in pairwise(sets)}
    edges[sets[-1]] = ()
    return Lattice(sets[0], edges)


def single_node(sensors: SensorSet) -> Lattice:
    return Lattice(tuple(sorted(sensors)), {tuple(sorted(sensors)): ()})


TIE_BAND = 1e-4
"""Actions scoring within this of the best count as tied; the first of them is taken."""


@dataclass(frozen=True)
class LinearScores:
    """Scores ``F @ W + b`` on the policy features ``F`` (standardisation folded in).

    The policy takes the first action within ``TIE_BAND`` of the best score. In a DAG two
    acquire actions often have (almost) the same cost-to-go (read a then b, or b then a), and
    a plain argmax would break such ties differently in float64 and float32; the band makes
    Python and ONNX agree. The exported ``action_scores`` encode the same rule.
    """

    W: FloatArray
    b: FloatArray

    def scores(self, F: FloatArray) -> FloatArray:
        return F @ self.W + self.b

    def choose(self, F: FloatArray) -> IntArray:
        return self.decide(F)[0]

    def decide(self, F: FloatArray) -> tuple[IntArray, FloatArray]:
        """Each row's action, and its margin: the least distance of any score from the tie
        band's edge. Score errors below half the margin cannot change the action."""
        scores = self.scores(F)
        edge = scores.max(axis=1, keepdims=True) - TIE_BAND
        choice: IntArray = (scores >= edge).argmax(axis=1)
        margin: FloatArray = np.abs(scores - edge).min(axis=1)
        return choice, margin

    def keep(self, columns: Sequence[int]) -> LinearScores:
        return LinearScores(self.W[:, list(columns)].copy(), self.b[list(columns)].copy())


class NodePolicy(Protocol):
    """A node policy: ``LinearScores`` or the paper's filter tree
    (``trainer.methods.dag.filter_tree.FilterTreePolicy``)."""

    def scores(self, F: FloatArray) -> FloatArray: ...

    def choose(self, F: FloatArray) -> IntArray: ...

    def keep(self, columns: Sequence[int]) -> NodePolicy: ...


def policy_features(X: np.ndarray, proba: FloatArray) -> FloatArray:
    """What a node policy sees: its features, its classifier's probabilities, top-1 and margin.
    A missing (NaN) feature is 0, as a device holds a failed sensor's columns."""
    X = np.asarray(X, dtype=np.float64)
    if not np.isfinite(X).all():
        X = np.where(np.isfinite(X), X, 0.0)
    top = np.sort(proba, axis=1)[:, ::-1]
    second = top[:, 1] if proba.shape[1] > 1 else np.zeros(len(proba))
    return np.hstack([np.asarray(X, dtype=np.float64), proba, top[:, :1],
                      (top[:, 0] - second)[:, None]])


@dataclass(frozen=True)
class UnitNode:
    """A lattice node after Graph-Reduce: actions (stop, acquire targets, escalate) + policy."""

    actions: tuple[tuple[Kind, SensorSet | None], ...]
    policy: NodePolicy | None


def node_id(sensors: SensorSet) -> str:
    return "root" if not sensors else "n" + "_".join(str(s) for s in sensors)
