"""The DAG sweep: build the graph, fill the classifier bank, pick the reduction, sweep lambda.

``sweep_dag`` returns every trained graph with its validation metrics; ``frontier`` keeps the
validation Pareto front (accuracy up, cost down). The reduction ("ridge" or "lr") is chosen
once per dataset by the mean validation objective (error + lambda * cost / all-sensor cost)
over a few probe lambdas, then used for the whole sweep.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from trainer.dag.bank import ClassifierBank, ClassifierKind
from trainer.dag.graph import Lattice, TrainedGraph, exhaustive_lattice, track_lattice
from trainer.dag.problem import DagProblem, SensorSet
from trainer.dag.reduce import REDUCTIONS, ReduceConfig, Reduction, train_graph
from trainer.dag.subsets import ProxyScorer, greedy_order, greedy_subsets
from trainer.dag.walk import walk
from trainer.policy import Metrics

DEFAULT_LAMBDAS = (0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0, 2.0)
QUICK_LAMBDAS = (0.01, 0.1, 1.0)


@dataclass(frozen=True)
class DagSettings:
    lambdas: tuple[float, ...] = DEFAULT_LAMBDAS
    escalation_prices: tuple[float | None, ...] = (None, 1.0)
    """``None``: the graph without the escalate action."""
    reductions: tuple[Reduction, ...] = REDUCTIONS
    classifier: ClassifierKind | Literal["auto"] = "auto"
    """"auto": the best on validation, with every sensor, of "hgb", "hgb-wide" and "lr"
    ("hgb" unless another is more than 0.5 points more accurate: it is the fastest tree)."""
    max_iter: int = 40
    n_folds: int = 3
    max_exhaustive: int = 6
    """Sensor count up to which the lattice holds every subset."""
    n_subsets: int = 6
    max_subset_size: int = 3
    max_nodes: int = 64
    order_track: int = 8
    """Length of the greedy-order track added to the greedy subsets (0: none)."""
    seed: int = 0

    @classmethod
    def quick(cls, **overrides: Any) -> DagSettings:
        base = cls(lambdas=QUICK_LAMBDAS, escalation_prices=(None, 1.0), reductions=("ridge",),
                   max_iter=20, n_folds=2, n_subsets=3, max_subset_size=2, max_nodes=16,
                   order_track=3)
        return replace(base, **overrides)


@dataclass
class SweepPoint:
    graph: TrainedGraph
    validation: Metrics


@dataclass
class DagSweep:
    problem: DagProblem
    bank: ClassifierBank
    lattice: Lattice
    tracks: list[SensorSet]
    reduction: Reduction
    reduction_scores: dict[str, float]
    points: list[SweepPoint] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    """CPU time of this process (the sweep is single-threaded): wall time minus waiting."""


def objective(metrics: Metrics, lam: float, total_cost: float) -> float:
    return (1.0 - metrics.accuracy) + lam * metrics.cost / max(total_cost, 1e-12)


def trim_tracks(tracks: Sequence[SensorSet], max_nodes: int) -> list[SensorSet]:
    """Shorten the longest (latest) tracks until the track lattice has <= ``max_nodes`` nodes."""
    kept = [tuple(t) for t in tracks if t]
    while kept and len(track_lattice(kept).edges) > max_nodes:
        longest = max(range(len(kept)), key=lambda i: (len(kept[i]), i))
        kept[longest] = kept[longest][:-1]
        kept = [t for t in kept if t]
    return kept


def build_lattice(problem: DagProblem, settings: DagSettings, scorer: ProxyScorer
                  ) -> tuple[Lattice, list[SensorSet]]:
    if problem.n_sensors <= settings.max_exhaustive:
        return exhaustive_lattice(problem.n_sensors), [(s,) for s in range(problem.n_sensors)]
    subsets = greedy_subsets(problem, scorer, n_subsets=settings.n_subsets,
                             max_size=settings.max_subset_size)
    # The subset reward saturates early when any of several weak subsets is right by chance
    # (binary tasks): the greedy forward order is one more track, so deep reads stay possible.
    order = tuple(greedy_order(problem, scorer, max_len=settings.order_track))
    tracks = trim_tracks([*subsets, order] if order else subsets, settings.max_nodes)
    return track_lattice(tracks), tracks


def evaluate(graph: TrainedGraph, bank: ClassifierBank, split: str) -> Metrics:
    return walk(graph, bank, split).metrics(bank.problem.splits[split].y)


def train_point(bank: ClassifierBank, lattice: Lattice, config: ReduceConfig) -> SweepPoint:
    graph = train_graph(bank, lattice, config)
    return SweepPoint(graph, evaluate(graph, bank, "val"))


def choose_reduction(bank: ClassifierBank, lattice: Lattice, settings: DagSettings
                     ) -> tuple[Reduction, dict[str, float]]:
    if len(settings.reductions) == 1:
        return settings.reductions[0], {}
    lams = sorted(settings.lambdas)
    probes = [lams[len(lams) // 4], lams[len(lams) // 2], lams[(3 * len(lams)) // 4]]
    price = next((p for p in settings.escalation_prices if p is not None), None)
    scores: dict[str, float] = {}
    for reduction in settings.reductions:
        values = [objective(train_point(bank, lattice, ReduceConfig(lam, price, reduction))
                            .validation, lam, bank.problem.total_cost) for lam in probes]
        scores[reduction] = float(np.mean(values))
    best = min(settings.reductions, key=lambda r: scores[r])
    return best, scores


def choose_bank(problem: DagProblem, settings: DagSettings) -> ClassifierBank:
    kinds: tuple[ClassifierKind, ...] = (
        ("hgb", "hgb-wide", "lr") if settings.classifier == "auto" else (settings.classifier,))
    banks = [ClassifierBank(problem, kind=kind, max_iter=settings.max_iter,
                            n_folds=settings.n_folds, seed=settings.seed) for kind in kinds]
    if len(banks) == 1:
        return banks[0]
    val = problem.splits["val"]
    scores = [float((b.proba(problem.all_sensors, "val").argmax(axis=1) == val.y).mean())
              for b in banks]
    best = int(np.argmax(scores))
    return banks[best] if scores[best] > scores[0] + 0.005 else banks[0]


def sweep_dag(problem: DagProblem, settings: DagSettings, *,
              bank: ClassifierBank | None = None) -> DagSweep:
    start, cpu_start = time.perf_counter(), time.process_time()
    bank = bank or choose_bank(problem, settings)
    lattice, tracks = build_lattice(problem, settings, ProxyScorer(problem, seed=settings.seed))
    reduction, scores = choose_reduction(bank, lattice, settings)
    sweep = DagSweep(problem, bank, lattice, tracks, reduction, scores)
    for price in settings.escalation_prices:
        for lam in settings.lambdas:
            sweep.points.append(train_point(bank, lattice, ReduceConfig(lam, price, reduction)))
    sweep.seconds = time.perf_counter() - start
    sweep.cpu_seconds = time.process_time() - cpu_start
    return sweep


def frontier(points: Sequence[SweepPoint]) -> list[SweepPoint]:
    """Validation Pareto front: no other point is at least as accurate and cheaper."""
    ordered = sorted(points, key=lambda p: (p.validation.cost, -p.validation.accuracy))
    front: list[SweepPoint] = []
    best = -1.0
    for point in ordered:
        if point.validation.accuracy > best:
            front.append(point)
            best = point.validation.accuracy
    return front
