"""The shape of a CSTC tree or a CSCC cascade: which node routes where, and the exit paths.

Nodes are numbered in level order (a parent before its children). A routing node sends a
row to ``hi`` with probability ``sigmoid(s)`` and to ``lo`` otherwise. In a tree every node
with children routes and every leaf is a terminal (it answers). In a cascade the ``lo`` branch
of a routing node is its own exit (it answers there, ``lo == -1``) and the last node answers
everything that reaches it: every node is a terminal. ``path(k)`` lists the nodes a row
passes to reach node ``k`` (root first, ``k`` last): the classifiers whose sensors it read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["tree", "cascade"]


@dataclass(frozen=True)
class Shape:
    kind: Kind
    hi: tuple[int, ...]
    """Child taken when the routing score is positive (-1: the node does not route)."""
    lo: tuple[int, ...]
    """Child taken otherwise (-1 in a cascade: the node's exit; -1 at a leaf)."""

    @property
    def n_nodes(self) -> int:
        return len(self.hi)

    def routes(self, k: int) -> bool:
        return self.hi[k] >= 0

    def parent(self, k: int) -> int:
        for j in range(self.n_nodes):
            if k in (self.hi[j], self.lo[j]):
                return j
        return -1

    def path(self, k: int) -> list[int]:
        out = [k]
        while (k := self.parent(k)) >= 0:
            out.append(k)
        return out[::-1]

    def alive(self) -> list[int]:
        """Nodes reachable from the root, in level order."""
        seen, frontier = [], [0]
        while frontier:
            k = frontier.pop(0)
            seen.append(k)
            frontier += [c for c in (self.hi[k], self.lo[k]) if c >= 0]
        return sorted(seen)

    def is_terminal(self, k: int) -> bool:
        return self.kind == "cascade" or not self.routes(k)

    def terminals(self) -> list[int]:
        return [k for k in self.alive() if self.is_terminal(k)]

    def below(self, k: int) -> list[int]:
        """``k`` and every node under it."""
        out, frontier = [], [k]
        while frontier:
            j = frontier.pop()
            out.append(j)
            frontier += [c for c in (self.hi[j], self.lo[j]) if c >= 0]
        return sorted(out)

    def cut(self, k: int) -> Shape:
        """The shape with node ``k`` made a terminal that does not route (its subtree dropped)."""
        hi, lo = list(self.hi), list(self.lo)
        hi[k] = lo[k] = -1
        return Shape(self.kind, tuple(hi), tuple(lo))


def full_tree(depth: int) -> Shape:
    """A balanced tree of ``depth`` levels (depth 1: one node)."""
    n = 2 ** depth - 1
    hi = tuple(2 * k + 1 if 2 * k + 1 < n else -1 for k in range(n))
    lo = tuple(2 * k + 2 if 2 * k + 2 < n else -1 for k in range(n))
    return Shape("tree", hi, lo)


def cascade(stages: int) -> Shape:
    """A chain of ``stages`` nodes, each but the last exiting what it does not pass on."""
    hi = tuple(k + 1 if k + 1 < stages else -1 for k in range(stages))
    return Shape("cascade", hi, tuple(-1 for _ in range(stages)))
