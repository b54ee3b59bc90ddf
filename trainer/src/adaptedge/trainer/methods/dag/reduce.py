"""Graph-Reduce (the paper's Alg. 1) with escalation, and the two cost-sensitive reductions.

Nodes are trained from the biggest sensor sets to the root. At node S every training example
gets the cost of each action, in units of error (lambda prices the all-sensor cost at
``lambda`` errors):

- stop: the node classifier's (out-of-fold) 0/1 error;
- acquire -> T: lambda * cost(T \\ S) / C_all + the cost-to-go at T under T's trained policy;
- escalate: lambda * (HPC's unread sensors + price * link) / C_all + the HPC's (out-of-fold)
  error.

The node policy is a cost-sensitive classifier over those actions; its choice on each
training example fixes the example's cost-to-go at S. Two linear reductions, both exported
as one MatMul: ``"lr"`` (importance-weighted multinomial logistic regression on the cheapest
action, weight = mean regret) and ``"ridge"`` (ridge regression of every action's cost,
argmin). Both see ``policy_features``: the node's inputs plus its classifier's confidence.

Deviation from the paper: its Learn step is a filter tree of logistic regressions on
homogeneous polynomial features; that is ``"paper"`` (``--param policy=paper``,
``trainer.methods.dag.filter_tree``), on the same features. The linear reductions stay the
default (measured effect: README, "Measured results").
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

import numpy as np
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from threadpoolctl import threadpool_limits

from adaptedge.trainer.methods.dag.bank import ClassifierBank
from adaptedge.trainer.methods.dag.filter_tree import DEFAULT_DEGREE, FilterTreePolicy
from adaptedge.trainer.methods.dag.graph import (
    Kind,
    Lattice,
    LinearScores,
    NodePolicy,
    UnitNode,
    policy_features,
)
from adaptedge.trainer.methods.dag.nodes import dag_walk, expand, prune
from adaptedge.trainer.methods.dag.problem import DagProblem, FloatArray, SensorSet
from adaptedge.trainer.policy.graph import Graph

Reduction = Literal["lr", "ridge", "paper"]
REDUCTIONS: tuple[Reduction, ...] = ("lr", "ridge")
"""The linear reductions (``--param policy=linear``, the default); "paper" is the filter tree
(``trainer.methods.dag.filter_tree``, ``--param policy=paper``)."""
RIDGE_ALPHA = 1.0
"""The ridge reduction's L2 penalty."""
_ABSENT = -1.0e4
"""Score of an action no training example preferred (never the argmax)."""


@dataclass(frozen=True)
class ReduceConfig:
    lam: float
    """Price of reading every sensor once, in units of error."""
    escalation: float | None = 1.0
    """Multiplier on the link cost when training; ``None`` removes the escalate action."""
    reduction: Reduction = "lr"
    allow_stop_at_root: bool = True
    degree: int = DEFAULT_DEGREE
    """Polynomial degree of the "paper" reduction's filter tree."""

    def params(self) -> dict[str, float | str]:
        out: dict[str, float | str] = {
            "lambda": self.lam, "reduction": self.reduction,
            "escalation_price": "off" if self.escalation is None else self.escalation}
        if self.reduction == "paper":
            out["policy_degree"] = self.degree
        return out


def _standardise(F: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    mu = F.mean(axis=0)
    sd = F.std(axis=0)
    sd[sd < 1e-9] = 1.0
    return (F - mu) / sd, mu, sd


def _fold(W: FloatArray, b: FloatArray, mu: FloatArray, sd: FloatArray) -> LinearScores:
    Wf = W / sd[:, None]
    return LinearScores(Wf, b - mu @ Wf)


@dataclass
class PolicyInputs:
    """A node's policy features ``F`` and what every fit on them shares: ``F`` standardised
    (``Fs = (F - mu) / sd``) and, built on first use, the centred ``Fs`` and its Gram matrix
    (``ridge_fit``). They do not depend on lambda, so a sweep computes them once per node."""

    F: FloatArray
    Fs: FloatArray
    mu: FloatArray
    sd: FloatArray
    _gram: tuple[FloatArray, FloatArray, FloatArray] | None = None

    @classmethod
    def of(cls, F: FloatArray) -> PolicyInputs:
        Fs, mu, sd = _standardise(F)
        return cls(F, Fs, mu, sd)

    def gram(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``(offset, Xc, Xc.T @ Xc + I)``: the column means of ``Fs``, ``Fs`` centred on them,
        and the ridge system matrix at alpha 1."""
        if self._gram is None:
            offset = np.average(self.Fs, axis=0)
            Xc = self.Fs - offset
            A = Xc.T @ Xc
            A.flat[:: A.shape[0] + 1] += RIDGE_ALPHA
            self._gram = (offset, Xc, A)
        return self._gram


def ridge_fit(inputs: PolicyInputs, costs: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(coef_, intercept_)`` of ``Ridge(alpha=1).fit(inputs.Fs, costs)`` (its Cholesky
    solver, step by step, the same floats) with the lambda-free part computed once."""
    offset, Xc, A = inputs.gram()
    y_offset = np.average(costs, axis=0)
    Xy = Xc.T @ (costs - y_offset)
    try:
        coef = linalg.solve(A.copy(), Xy, assume_a="pos", overwrite_a=True).T
    except linalg.LinAlgError:  # sklearn falls back to its SVD solver
        model = Ridge(alpha=RIDGE_ALPHA).fit(inputs.Fs, costs)
        return model.coef_, np.asarray(model.intercept_, dtype=np.float64)
    coef = np.divide(coef, np.ones(coef.shape[1]))  # sklearn's X_scale: its layout too
    return coef, y_offset - offset @ coef.T


def fit_policy(F: FloatArray | PolicyInputs, costs: FloatArray, reduction: Reduction,
               degree: int = DEFAULT_DEGREE) -> NodePolicy:
    """A cost-sensitive classifier: argmax of its scores ~ argmin of ``costs``; linear, or
    the paper's filter tree for ``reduction="paper"``. ``F``: the policy features, or their
    ``PolicyInputs`` (shared by the fits of a sweep)."""
    inputs = F if isinstance(F, PolicyInputs) else PolicyInputs.of(np.asarray(F))
    if reduction == "paper":
        return FilterTreePolicy.fit(inputs.F, costs, degree)
    Fs, mu, sd = inputs.Fs, inputs.mu, inputs.sd
    n_features, n_actions = Fs.shape[1], costs.shape[1]
    W = np.zeros((n_features, n_actions))
    if reduction == "ridge":
        coef, intercept = ridge_fit(inputs, costs)
        return _fold(-coef.T.reshape(n_features, n_actions), -intercept, mu, sd)
    if reduction != "lr":
        raise ValueError(f"unknown reduction {reduction!r}; choose one of {REDUCTIONS}")
    best = costs.argmin(axis=1)
    weight = costs.mean(axis=1) - costs.min(axis=1)
    labels = np.unique(best[weight > 0])
    if len(labels) < 2:
        b = np.full(n_actions, _ABSENT)
        b[labels[0] if len(labels) else int(costs.mean(axis=0).argmin())] = 0.0
        return LinearScores(W, b)
    keep = weight > 0
    model = LogisticRegression(C=1.0, max_iter=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(Fs[keep], best[keep], sample_weight=weight[keep] / weight[keep].mean())
    b = np.full(n_actions, _ABSENT)
    if len(labels) == 2:
        W[:, labels[1]] = model.coef_[0]
        b[labels[0]], b[labels[1]] = 0.0, model.intercept_[0]
    else:
        W[:, labels] = model.coef_.T
        b[labels] = model.intercept_
    return _fold(W, b, mu, sd)


_INPUTS: weakref.WeakKeyDictionary[TrainProba, dict[SensorSet, PolicyInputs]] = (
    weakref.WeakKeyDictionary())


def policy_inputs(bank: TrainProba, node: SensorSet) -> PolicyInputs:
    """``node``'s policy features on the training split (its columns and out-of-fold
    probabilities), kept per bank: every lambda of a sweep trains on the same ones."""
    cache = _INPUTS.setdefault(bank, {})
    if node not in cache:
        train = bank.problem.splits["train"]
        cols = list(bank.problem.columns(node))
        X = train.X[:, cols] if cols else np.zeros((len(train.y), 0))
        cache[node] = PolicyInputs.of(policy_features(X, bank.proba(node, "train")))
    return cache[node]


class TrainProba(Protocol):
    """What Graph-Reduce reads from a bank: the problem and each node's training-split
    (out-of-fold) probabilities."""

    @property
    def problem(self) -> DagProblem: ...

    def proba(self, sensors: SensorSet, split: str) -> FloatArray: ...


@dataclass(eq=False)
class ReduceInputs:
    """A bank's ``TrainProba`` for the lattice's nodes, small enough to send to a worker
    process: the training split only, no models."""

    problem: DagProblem
    train_proba: dict[SensorSet, FloatArray]

    @classmethod
    def of(cls, bank: ClassifierBank, lattice: Lattice) -> ReduceInputs:
        problem = replace(bank.problem, splits={"train": bank.problem.splits["train"]})
        return cls(problem, {node: bank.proba(node, "train") for node in lattice.nodes})

    def proba(self, sensors: SensorSet, split: str) -> FloatArray:
        if split != "train":
            raise KeyError(f"ReduceInputs holds the training split only, not {split!r}")
        return self.train_proba[sensors]


def graph_reduce(bank: TrainProba, lattice: Lattice, config: ReduceConfig
                 ) -> dict[SensorSet, UnitNode]:
    problem = bank.problem
    train = problem.splits["train"]
    scale = config.lam / max(problem.total_cost, 1e-12)
    hpc_error = train.hpc_error
    rows = np.arange(len(train.y))
    to_go: dict[SensorSet, FloatArray] = {}
    units: dict[SensorSet, UnitNode] = {}
    for node in lattice.nodes:
        proba = bank.proba(node, "train")
        actions: list[tuple[Kind, SensorSet | None]] = []
        columns: list[FloatArray] = []
        if config.allow_stop_at_root or node != lattice.root or not lattice.edges[node]:
            actions.append(("stop", None))
            columns.append((proba.argmax(axis=1) != train.y).astype(np.float64))
        for target in lattice.edges[node]:
            actions.append(("acquire", target))
            step = problem.set_cost(target) - problem.set_cost(node)
            columns.append(scale * step + to_go[target])
        if config.escalation is not None:
            unread = problem.escalation_cost(node) - problem.link_cost
            price = unread + config.escalation * problem.link_cost
            actions.append(("escalate", None))
            columns.append(scale * price + hpc_error)
        costs = np.column_stack(columns)
        if len(actions) == 1:
            units[node] = UnitNode(tuple(actions), None)
            to_go[node] = costs[:, 0]
            continue
        inputs = policy_inputs(bank, node)
        policy = fit_policy(inputs, costs, config.reduction, config.degree)
        choice = policy.choose(inputs.F)
        units[node] = UnitNode(tuple(actions), policy)
        to_go[node] = costs[rows, choice]
    return units


def train_graph(bank: ClassifierBank, lattice: Lattice, config: ReduceConfig) -> Graph:
    """Graph-Reduce, then the per-sensor graph pruned to what train and validation use."""
    return finish_graph(bank, lattice, config, graph_reduce(bank, lattice, config))


def finish_graph(bank: ClassifierBank, lattice: Lattice, config: ReduceConfig,
                 units: dict[SensorSet, UnitNode]) -> Graph:
    """The per-sensor graph of Graph-Reduce's ``units``, pruned to what train and validation
    use."""
    graph = expand(bank, lattice.root, units, config.params())
    used: dict[str, set[int]] = {}
    for split in ("train", "val"):
        for nid, chosen in dag_walk(graph, bank, split).actions.items():
            used.setdefault(nid, set()).update(int(a) for a in np.unique(chosen))
    return prune(graph, used)


def _reduce_chunk(item: tuple[ReduceInputs, Lattice, list[ReduceConfig]]
                  ) -> list[dict[SensorSet, UnitNode]]:
    """Graph-Reduce of each config on a worker (one BLAS thread, as in the sweep)."""
    inputs, lattice, configs = item
    with threadpool_limits(limits=1):
        return [graph_reduce(inputs, lattice, config) for config in configs]


def train_graphs(bank: ClassifierBank, lattice: Lattice, configs: Sequence[ReduceConfig],
                 n_jobs: int = 1, *, progress: bool = False, desc: str = "dag sweep"
                 ) -> list[Graph]:
    """``train_graph`` of each config; Graph-Reduce runs on up to ``n_jobs`` processes
    (``trainer.parallel``), each given the lattice's training probabilities once
    (``ReduceInputs``). Each config's graph depends on its config only: the same graphs for
    any ``n_jobs``."""
    from adaptedge.trainer.parallel import parallel_map, usable_cores
    from adaptedge.trainer.progress import track

    configs = list(configs)
    jobs = max(1, min(int(n_jobs), usable_cores(), len(configs)))
    units: list[dict[SensorSet, UnitNode]] = []
    if jobs == 1:  # here: the bank's own policy-input cache, progress per graph
        units = [graph_reduce(bank, lattice, c)
                 for c in track(configs, desc, len(configs), progress)]
    else:
        inputs = ReduceInputs.of(bank, lattice)
        chunks = [(inputs, lattice, configs[k::jobs]) for k in range(jobs)]
        done = parallel_map(_reduce_chunk, chunks, jobs, progress, desc)
        units = [done[i % jobs][i // jobs] for i in range(len(configs))]
    return [finish_graph(bank, lattice, c, u) for c, u in zip(configs, units, strict=True)]
