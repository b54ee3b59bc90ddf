"""The Python policy: walk a ``TrainedGraph`` over a split, batched by node.

An example enters the root, reads the node's sensors, and takes the first highest-scoring
action (the device's rule): stop answers with the node classifier, escalate answers with the
HPC after reading the HPC's unread sensors and paying the link, acquire moves one sensor on.
Costs follow ``protocol.costs``: each sensor read once, plus the link when escalating.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from adaptedge.trainer.dag.bank import ClassifierBank
from adaptedge.trainer.dag.graph import TrainedGraph, policy_features
from adaptedge.trainer.dag.problem import BoolArray, DagProblem, FloatArray, IntArray
from adaptedge.trainer.policy import Metrics


@dataclass(frozen=True)
class WalkResult:
    answer: IntArray
    escalated: BoolArray
    read: BoolArray
    """[N, n_sensors]: which sensors each decision read (escalation's included)."""
    cost: FloatArray
    actions: dict[str, IntArray]
    """Node id -> the chosen action index of each example that visited it, in row order."""
    visits: dict[str, IntArray]
    """Node id -> the rows that visited it."""
    margin: FloatArray
    """[N]: how close each decision came to another outcome: the least policy margin
    (``LinearScores.decide``) over the nodes it visited and, if it stopped, the gap between
    its top two probabilities (inf where nothing was chosen). Float32 inference may differ
    from this float64 walk only where the margin is within float32 noise."""

    def metrics(self, y: IntArray) -> Metrics:
        return Metrics(accuracy=float((self.answer == y).mean()), cost=float(self.cost.mean()),
                       escalation_rate=float(self.escalated.mean()),
                       avg_sensors_read=float(self.read.sum(axis=1).mean()))


def walk(graph: TrainedGraph, bank: ClassifierBank, split: str) -> WalkResult:
    problem: DagProblem = bank.problem
    data = problem.splits[split]
    n = len(data.y)
    answer = np.full(n, -1, dtype=np.int64)
    escalated = np.zeros(n, dtype=bool)
    read = np.zeros((n, problem.n_sensors), dtype=bool)
    margin = np.full(n, np.inf)
    actions: dict[str, list[IntArray]] = defaultdict(list)
    visits: dict[str, list[IntArray]] = defaultdict(list)
    current: dict[str, IntArray] = {graph.root: np.arange(n)}
    for _ in range(len(graph.nodes) + 1):
        if not current:
            break
        arriving: dict[str, list[IntArray]] = defaultdict(list)
        for nid, rows in current.items():
            node = graph.nodes[nid]
            if node.sensors:
                read[np.ix_(rows, np.asarray(node.sensors, dtype=np.int64))] = True
            proba = bank.proba(node.classifier, split)[rows]
            if node.policy is None:
                choice = np.zeros(len(rows), dtype=np.int64)
            else:
                cols = list(problem.columns(node.classifier))
                feats = policy_features(data.X[np.ix_(rows, np.asarray(cols, dtype=np.int64))]
                                        if cols else
                                        np.zeros((len(rows), 0)), proba)
                choice, node_margin = node.policy.decide(feats)
                margin[rows] = np.minimum(margin[rows], node_margin)
            actions[nid].append(choice)
            visits[nid].append(rows)
            for index, action in enumerate(node.actions):
                mask = choice == index
                sel = rows[mask]
                if not sel.size:
                    continue
                if action.kind == "stop":
                    answer[sel] = proba[mask].argmax(axis=1)
                    if proba.shape[1] > 1:
                        top2 = np.sort(proba[mask], axis=1)[:, -2:]
                        margin[sel] = np.minimum(margin[sel], top2[:, 1] - top2[:, 0])
                elif action.kind == "escalate":
                    escalated[sel] = True
                    answer[sel] = data.hpc_proba[sel].argmax(axis=1)
                    if problem.hpc_sensors:
                        read[np.ix_(sel, np.asarray(problem.hpc_sensors, dtype=np.int64))] = True
                else:
                    assert action.next is not None
                    arriving[action.next].append(sel)
        current = {nid: np.concatenate(parts) for nid, parts in arriving.items()}
    if current:
        raise RuntimeError(f"policy walk did not terminate within {len(graph.nodes) + 1} steps: "
                           "the graph has a cycle")
    cost = read.astype(np.float64) @ problem.sensor_costs + escalated * problem.link_cost
    return WalkResult(answer, escalated, read, cost,
                      {k: np.concatenate(v) for k, v in actions.items()},
                      {k: np.concatenate(v) for k, v in visits.items()}, margin)
