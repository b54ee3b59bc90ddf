"""A policy graph as its root-to-exit paths, for ``adaptedge inspect``: each node with the
sensors it adds to those read before it on the path, then how the path ends (``stop``,
``escalate``, or a read action's sensor). Shows the tree a method found (CSTC: the routing
nodes and the sensors each leaf reads)."""

from __future__ import annotations

from adaptedge.protocol.policy_graph import PolicyGraph

MAX_PATHS = 32
"""Paths printed at most (a many-node DAG policy lists the first ones and a count)."""


def policy_paths(graph: PolicyGraph) -> list[str]:
    """One line per root-to-exit path, depth first in action order (a node's own exits before
    its children's paths), at most ``MAX_PATHS``."""
    lines: list[str] = []
    total = 0
    stack: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [(graph.root, (), ())]
    while stack:
        nid, steps, read = stack.pop()
        node = graph.nodes[nid]
        added = [s for s in node.sensors if s not in read]
        step = f"{nid} [{', '.join('+' + s for s in added)}]" if added else f"{nid} []"
        here, seen = (*steps, step), (*read, *added)
        children = []
        for action in node.actions:
            if action.next is not None and action.next not in {s.split(" ")[0] for s in here}:
                children.append((action.next, here, seen))
            elif action.next is None:
                end = action.kind + (f" {action.sensor}" if action.sensor else "")
                total += 1
                if len(lines) < MAX_PATHS:
                    lines.append(" -> ".join(here) + f": {end}")
        stack.extend(reversed(children))
    if total > len(lines):
        lines.append(f"... and {total - len(lines)} more paths")
    return lines
