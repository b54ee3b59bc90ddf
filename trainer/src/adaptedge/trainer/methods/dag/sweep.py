"""The DAG sweep: build the graph, fill the classifier bank, pick the reduction, sweep lambda.

``sweep_dag`` returns every trained graph with its validation metrics
(``trainer.policy.frontier.pareto_frontier`` keeps the validation Pareto front). The reduction
("ridge" or "lr") is chosen once per dataset by the mean validation objective (error +
lambda * cost / all-sensor cost) over a few probe lambdas, then used for the whole sweep.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from threadpoolctl import threadpool_limits

from adaptedge.trainer.errors import ParamError
from adaptedge.trainer.methods.dag.bank import (
    ClassifierBank,
    ClassifierKind,
    boosting_rounds,
    prefetch_models,
)
from adaptedge.trainer.methods.dag.blocks import (
    BLOCK_ENDS,
    QUICK_BLOCK_ENDS,
    WIDE_SENSORS,
    block_lattice,
)
from adaptedge.trainer.methods.dag.filter_tree import DEFAULT_DEGREE
from adaptedge.trainer.methods.dag.graph import (
    Lattice,
    exhaustive_lattice,
    track_lattice,
    track_lattice_size,
)
from adaptedge.trainer.methods.dag.masked import ChoiceBank, MaskedBank
from adaptedge.trainer.methods.dag.nodes import evaluate
from adaptedge.trainer.methods.dag.problem import DagProblem, SensorSet
from adaptedge.trainer.methods.dag.reduce import REDUCTIONS, ReduceConfig, Reduction, train_graphs
from adaptedge.trainer.methods.dag.subsets import (
    ProxyScorer,
    greedy_order,
    greedy_subsets,
    lattice_scorer,
)
from adaptedge.trainer.policy.graph import Graph, Metrics
from adaptedge.trainer.progress import Stages

ClassifierChoice = ClassifierKind | Literal["auto", "per-subset", "masked"]
LatticeChoice = Literal["auto", "tracks", "blocks"]
LATTICE_CHOICES: tuple[str, ...] = ("auto", "tracks", "blocks")
CLASSIFIER_CHOICES: tuple[str, ...] = ("auto", "per-subset", "masked", "hgb", "hgb-wide", "lr")
DEFAULT_LAMBDAS = (0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.7, 1.0, 2.0)
QUICK_LAMBDAS = (0.01, 0.1, 1.0)


@dataclass(frozen=True)
class DagSettings:
    lambdas: tuple[float, ...] = DEFAULT_LAMBDAS
    escalation_prices: tuple[float | None, ...] = (None, 1.0)
    """``None``: the graph without the escalate action."""
    reductions: tuple[Reduction, ...] = REDUCTIONS
    """The linear reductions by default; ``("paper",)``: the paper's filter tree."""
    policy_degree: int = DEFAULT_DEGREE
    """Polynomial degree of the filter tree (reduction "paper")."""
    classifier: ClassifierChoice = "auto"
    """"per-subset": one model per sensor set, of the kind best on validation with every
    sensor among "hgb", "hgb-wide" and "lr" ("hgb" unless another is more than 0.5 points
    more accurate: it is the fastest tree); "masked": one model trained with sensors hidden
    (``trainer.methods.dag.masked``); "auto": per sensor set, the "per-subset" or the "masked" model,
    whichever has the lower validation log-loss; "hgb", "hgb-wide", "lr": that kind per set."""
    max_iter: int = 40
    """Fewest boosting rounds a tree budget below buys (K-class models grow K trees a round)."""
    subset_trees: int = 500
    """Tree budget of a per-subset boosted model: at most that many rounds for two classes,
    ``subset_trees // K`` (at least ``max_iter``) for K > 2 classes. Each model stops early
    once the log-loss on a held-out tenth of its fit rows stops falling
    (``trainer.methods.dag.bank``), so small sensor sets grow few rounds and big ones many."""
    masked_trees: int = 300
    """Tree budget of the masked model (one model serves every sensor set), as
    ``subset_trees`` but without early stopping: its rows are copies of each other."""
    masked_replicas: int = 4
    """Copies of each training row in the masked model's training set (one unmasked)."""
    n_folds: int = 3
    max_exhaustive: int = 6
    """Sensor count up to which the lattice holds every subset (2^M nodes, each a classifier
    fitted n_folds + 1 times: 10 sensors would be 1,024 nodes)."""
    n_subsets: int = 6
    max_subset_size: int = 3
    max_nodes: int = 64
    """Lattice size cap: tracks are cut in priority order until the lattice fits
    (``fit_tracks``)."""
    order_track: int = 12
    """Length of the greedy-order track, the lattice's first track (0: none). Long enough
    that a hard example can read most sensors locally; ``max_nodes`` bounds the lattice."""
    lattice: LatticeChoice = "auto"
    """Beyond ``max_exhaustive`` sensors: "tracks" (the greedy order and subsets, single-sensor
    steps, cut to ``max_nodes``), "blocks" (every union of blocks of the gain order,
    ``trainer.methods.dag.blocks``) or "auto": tracks up to ``WIDE_SENSORS`` sensors, blocks
    beyond."""
    block_ends: tuple[float, ...] = BLOCK_ENDS
    """Where the blocks of the "blocks" lattice end, as fractions of the all-sensor cost."""
    seed: int = 0

    @classmethod
    def quick(cls, **overrides: Any) -> DagSettings:
        base = cls(lambdas=QUICK_LAMBDAS, escalation_prices=(None, 1.0), reductions=("ridge",),
                   max_iter=20, subset_trees=60, masked_trees=60, masked_replicas=3, n_folds=2,
                   n_subsets=3, max_subset_size=2, max_nodes=16, order_track=3,
                   block_ends=QUICK_BLOCK_ENDS)
        return replace(base, **overrides)


@dataclass
class DagSweep:
    problem: DagProblem
    bank: ClassifierBank
    lattice: Lattice
    tracks: list[SensorSet]
    scorer: ProxyScorer
    """The proxy that ranked the sensors (its cache serves the baselines' sensor order)."""
    reduction: Reduction
    reduction_scores: dict[str, float]
    points: list[Graph] = field(default_factory=list)
    """Every trained graph, with its validation metrics."""
    classifier: dict[str, object] = field(default_factory=dict)
    """The bank's ``summary()``; for a per-node choice also ``lattice_nodes``: how many
    lattice nodes use each model."""
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    """CPU time of this process (the sweep is single-threaded): wall time minus waiting."""


def objective(metrics: Metrics, lam: float, total_cost: float) -> float:
    return (1.0 - metrics.accuracy) + lam * metrics.cost / max(total_cost, 1e-12)


def fit_tracks(tracks: Sequence[SensorSet], max_nodes: int) -> list[SensorSet]:
    """Tracks in priority order, each cut to its longest prefix that keeps the track lattice
    within ``max_nodes`` nodes; a track that adds no node (or whose first step does not fit)
    is left out."""
    kept: list[SensorSet] = []
    size = track_lattice_size(kept)
    for track in tracks:
        for k in range(len(track), 0, -1):
            grown = track_lattice_size([*kept, tuple(track[:k])])
            if grown <= max_nodes:
                if grown > size:
                    kept.append(tuple(track[:k]))
                    size = grown
                break
    return kept


def build_lattice(problem: DagProblem, settings: DagSettings, scorer: ProxyScorer
                  ) -> tuple[Lattice, list[SensorSet]]:
    """Every subset for few sensors; many sensors (``settings.lattice``): the block lattice
    (``trainer.methods.dag.blocks``), or a track lattice over the greedy sensor order and then
    the greedy subsets (Alg. 2), in that priority when ``max_nodes`` cuts them.

    The order track comes first: it is what lets a hard example read deep. The subsets'
    reward ("some subset classifies it right") saturates early on binary tasks, where weak
    subsets are right by chance, so they branch but cannot carry the deep reads alone.
    """
    if problem.n_sensors <= settings.max_exhaustive:
        return exhaustive_lattice(problem.n_sensors), [(s,) for s in range(problem.n_sensors)]
    if settings.lattice not in LATTICE_CHOICES:
        raise ValueError(f"unknown lattice {settings.lattice!r}; choose one of "
                         f"{list(LATTICE_CHOICES)}")
    if settings.lattice == "blocks" or (settings.lattice == "auto"
                                        and problem.n_sensors > WIDE_SENSORS):
        return block_lattice(problem, settings.block_ends)
    subsets = greedy_subsets(problem, scorer, n_subsets=settings.n_subsets,
                             max_size=settings.max_subset_size)
    order = tuple(greedy_order(problem, scorer, max_len=settings.order_track))
    tracks = fit_tracks([order, *subsets], settings.max_nodes)
    return track_lattice(tracks), tracks


def train_point(bank: ClassifierBank, lattice: Lattice, config: ReduceConfig) -> Graph:
    """Graph-Reduce with ``config``; the graph carries its validation metrics."""
    return train_points(bank, lattice, [config])[0]


def train_points(bank: ClassifierBank, lattice: Lattice, configs: Sequence[ReduceConfig],
                 n_jobs: int = 1, *, progress: bool = False, desc: str = "dag sweep"
                 ) -> list[Graph]:
    """``train_point`` of each config, Graph-Reduce on up to ``n_jobs`` processes
    (``reduce.train_graphs``: the same graphs for any ``n_jobs``)."""
    graphs = train_graphs(bank, lattice, configs, n_jobs, progress=progress, desc=desc)
    return [g.with_validation(evaluate(g, bank, "val")) for g in graphs]


def choose_reduction(bank: ClassifierBank, lattice: Lattice, settings: DagSettings,
                     n_jobs: int = 1) -> tuple[Reduction, dict[str, float]]:
    """The reduction with the lowest mean validation objective over three probe lambdas
    (every reduction's probes trained side by side on ``n_jobs`` processes)."""
    if len(settings.reductions) == 1:
        return settings.reductions[0], {}
    lams = sorted(settings.lambdas)
    probes = [lams[len(lams) // 4], lams[len(lams) // 2], lams[(3 * len(lams)) // 4]]
    price = next((p for p in settings.escalation_prices if p is not None), None)
    configs = [ReduceConfig(lam, price, reduction, degree=settings.policy_degree)
               for reduction in settings.reductions for lam in probes]
    points = train_points(bank, lattice, configs, n_jobs, desc="dag reduction probes")
    values = [objective(p.validation, c.lam, bank.problem.total_cost)
              for p, c in zip(points, configs, strict=True)]
    scores: dict[str, float] = {
        r: float(np.mean(values[i * len(probes):(i + 1) * len(probes)]))
        for i, r in enumerate(settings.reductions)}
    best = min(settings.reductions, key=lambda r: scores[r])
    return best, scores


def choose_per_subset(problem: DagProblem, settings: DagSettings, n_jobs: int = 1
                      ) -> ClassifierBank:
    """The per-subset bank: the settings' kind, or the best on validation with every sensor
    (the kinds' models fitted on ``n_jobs`` processes)."""
    kinds: tuple[ClassifierKind, ...]
    missing = bool(np.isnan(problem.splits["train"].X).any())
    if settings.classifier == "auto" or settings.classifier == "per-subset":
        # logistic regression cannot learn from missing cells; the boosted kinds route them
        kinds = ("hgb", "hgb-wide") if missing else ("hgb", "hgb-wide", "lr")
    elif settings.classifier == "masked":  # classifier_bank builds that one itself
        raise ValueError("the masked bank is not a per-subset bank: use classifier_bank")
    elif settings.classifier == "lr" and missing:
        raise ParamError("dag classifier=lr cannot learn from missing values (the training "
                         "split has NaN cells): use classifier=auto, hgb or masked, or train "
                         "with --impute median")
    else:
        kinds = (settings.classifier,)
    rounds = boosting_rounds(problem.n_classes, settings.subset_trees, settings.max_iter)
    banks = [ClassifierBank(problem, kind=kind, max_iter=rounds, n_folds=settings.n_folds,
                            seed=settings.seed, early_stopping=True) for kind in kinds]
    if len(banks) == 1:
        return banks[0]
    prefetch_models(banks, [problem.all_sensors], n_jobs)  # the kinds' fits side by side
    val = problem.splits["val"]
    scores = [float((b.proba(problem.all_sensors, "val").argmax(axis=1) == val.y).mean())
              for b in banks]
    best = int(np.argmax(scores))
    chosen = banks[best] if scores[best] > scores[0] + 0.005 else banks[0]
    chosen.kind_scores = dict(zip(kinds, scores, strict=True))
    return chosen


def masked_rounds(problem: DagProblem, settings: DagSettings) -> int:
    """Boosting rounds of the masked model: its tree budget over the trees grown per round."""
    return boosting_rounds(problem.n_classes, settings.masked_trees, settings.max_iter)


def choose_bank(problem: DagProblem, settings: DagSettings,
                mask_sets: Sequence[SensorSet] | None = None, n_jobs: int = 1
                ) -> ClassifierBank:
    """The classifier bank ``settings.classifier`` asks for (see ``DagSettings``).

    ``mask_sets``: the sensor sets the masked model should serve best (the lattice's nodes).
    """
    if settings.classifier not in CLASSIFIER_CHOICES:
        raise ValueError(f"unknown classifier {settings.classifier!r}; choose one of "
                         f"{list(CLASSIFIER_CHOICES)}")
    if settings.classifier in ("masked", "auto"):
        masked = MaskedBank(problem, max_iter=masked_rounds(problem, settings),
                            n_folds=settings.n_folds,
                            seed=settings.seed, replicas=settings.masked_replicas,
                            mask_sets=mask_sets)
        if settings.classifier == "masked":
            return masked
        return ChoiceBank(choose_per_subset(problem, settings, n_jobs), masked)
    return choose_per_subset(problem, settings, n_jobs)


def sweep_dag(problem: DagProblem, settings: DagSettings, *,
              bank: ClassifierBank | None = None, progress: bool = False,
              n_jobs: int = 1) -> DagSweep:
    """The sweep's graphs (``progress``: stage lines and the sweep's done/total, ETA).
    ``n_jobs``: processes for the lattice nodes' classifiers (``ClassifierBank.prefetch``)
    and for Graph-Reduce of the probes and the lambdas (``train_points``); the same graphs for
    any value."""
    # one thread for OpenMP (boosting) and BLAS (ridge / logistic policies): on a shared
    # 2-core machine extra threads spin and multiply CPU time
    with threadpool_limits(limits=1):
        return _sweep(problem, settings, bank, progress, n_jobs)


def _sweep(problem: DagProblem, settings: DagSettings, bank: ClassifierBank | None,
           progress: bool, n_jobs: int = 1) -> DagSweep:
    start, cpu_start = time.perf_counter(), time.process_time()
    stages = Stages("dag", ("sensor lattice", "classifier bank", "reduction", "sweep"),
                    progress)
    stages.start("sensor lattice")
    scorer = lattice_scorer(problem, settings.seed, threads=n_jobs)
    lattice, tracks = build_lattice(problem, settings, scorer)
    stages.start("classifier bank")
    bank = bank or choose_bank(problem, settings, mask_sets=list(lattice.edges), n_jobs=n_jobs)
    stages.start("reduction")  # every lattice node's classifier: Graph-Reduce reads them all
    bank.prefetch(lattice.nodes, n_jobs)
    reduction, scores = choose_reduction(bank, lattice, settings, n_jobs)
    sweep = DagSweep(problem, bank, lattice, tracks, scorer, reduction, scores)
    stages.start("sweep")
    grid = [(price, lam) for price in settings.escalation_prices for lam in settings.lambdas]
    configs = [ReduceConfig(lam, price, reduction, degree=settings.policy_degree)
               for price, lam in grid]
    for point in train_points(bank, lattice, configs, n_jobs, progress=progress,
                              desc="dag sweep (lambda, escalation price)"):
        point.params["classifier"] = bank.kind
        sweep.points.append(point)
    sweep.classifier = bank.summary()
    if isinstance(bank, ChoiceBank):
        sweep.classifier["lattice_nodes"] = bank.counts(list(lattice.edges))
    sweep.seconds = time.perf_counter() - start
    sweep.cpu_seconds = time.process_time() - cpu_start
    return sweep
