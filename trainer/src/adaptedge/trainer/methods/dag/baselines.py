"""Baselines as policy graphs, so they train, export and evaluate like the DAG.

- static: one node holding a fixed sensor subset, stop only (the indexing paper's skyline:
  every subset when there are few sensors, greedy forward-selection prefixes otherwise,
  plus the DAG's lattice nodes, whose classifiers exist already);
- all-sensors: the static node holding every sensor;
- cascade: sensors in greedy order, one stage per sensor (then all sensors), stop or go on,
  trained by Graph-Reduce without escalation;
- one-node: ADAPT's shape, a static skyline node whose only choice is stop or escalate,
  trained by Graph-Reduce.
"""

from __future__ import annotations

from itertools import combinations

from adaptedge.trainer.methods.dag.bank import ClassifierBank
from adaptedge.trainer.methods.dag.graph import chain_lattice, node_id, single_node
from adaptedge.trainer.methods.dag.nodes import dag_node, evaluate
from adaptedge.trainer.methods.dag.problem import SensorSet
from adaptedge.trainer.methods.dag.reduce import ReduceConfig, Reduction
from adaptedge.trainer.methods.dag.subsets import ProxyScorer, greedy_order
from adaptedge.trainer.methods.dag.sweep import train_point
from adaptedge.trainer.policy.graph import Graph, GraphAction


def static_graph(bank: ClassifierBank, sensors: SensorSet) -> Graph:
    key = tuple(sorted(sensors))
    node = dag_node(bank, key, key, (GraphAction("stop"),), None)
    return Graph("", node_id(key), {node_id(key): node},
                 params={"sensors": ",".join(str(s) for s in key) or "none"})


def static_sets(bank: ClassifierBank, scorer: ProxyScorer, *, max_exhaustive: int = 6,
                extra: list[SensorSet] | None = None) -> list[SensorSet]:
    problem = bank.problem
    if problem.n_sensors <= max_exhaustive:
        sets = [c for k in range(problem.n_sensors + 1)
                for c in combinations(range(problem.n_sensors), k)]
    else:
        order = greedy_order(problem, scorer)
        sets = [tuple(sorted(order[:k])) for k in range(problem.n_sensors + 1)]
    sets += [tuple(sorted(s)) for s in extra or []]
    return list(dict.fromkeys(sets))


def static_points(bank: ClassifierBank, sets: list[SensorSet]) -> list[Graph]:
    graphs = [static_graph(bank, s) for s in sets]
    return [g.with_validation(evaluate(g, bank, "val")) for g in graphs]


def cascade_points(bank: ClassifierBank, order: list[int], lambdas: tuple[float, ...],
                   reduction: Reduction, *, max_stages: int = 8, n_jobs: int = 1
                   ) -> list[Graph]:
    """One cascade per lambda; the stages' models fitted first on ``n_jobs`` processes."""
    problem = bank.problem
    stages = [tuple(sorted(order[:k])) for k in range(1, min(max_stages, len(order)) + 1)]
    if stages[-1] != problem.all_sensors:
        stages.append(problem.all_sensors)
    bank.prefetch(stages, n_jobs)  # Graph-Reduce reads each stage's validation and fold models
    lattice = chain_lattice(stages)
    return [train_point(bank, lattice, ReduceConfig(lam, None, reduction)) for lam in lambdas]


def one_node_points(bank: ClassifierBank, sets: list[SensorSet], lambdas: tuple[float, ...],
                    reduction: Reduction, price: float = 1.0) -> list[Graph]:
    return [train_point(bank, single_node(s), ReduceConfig(lam, price, reduction))
            for s in sets for lam in lambdas]

