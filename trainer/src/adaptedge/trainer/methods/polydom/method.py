"""``adaptedge train --method polydom|greedy|greedy-acc|greedy-cost``.

Every feature set's model comes from the node-classifier bank (``trainer.methods.dag.bank``)
and its accuracy is measured on VALIDATION (never test). Each kept set is exported as a
stop-only graph (``static_graph``); ``budget_index`` builds the bundle's index over them
(``protocol.budget_index``), with each model's worst-case cost as a polynomial in the size.

Options (``--param``, checked in ``methods.params``): ``epsilon`` (default: the progressive
modality, ``polydom.progressive``, within ``max_sets``), ``max_sets``, ``delta`` (0) for
PolyDom's pruning, ``covering`` (default off: the covering property, exact only when features
do not combine, so off for trained models), ``classifier`` (lr, hgb; default lr; also for the
greedy family).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.budget_index import BudgetIndex, IndexedModel, cost_at
from adaptedge.protocol.costs import size_polynomials
from adaptedge.trainer.errors import TrainError
from adaptedge.trainer.methods.dag.bank import ClassifierBank
from adaptedge.trainer.methods.dag.baselines import static_graph
from adaptedge.trainer.methods.dag.nodes import evaluate
from adaptedge.trainer.methods.dag.problem import problem_from
from adaptedge.trainer.methods.params import check_params
from adaptedge.trainer.methods.polydom.greedy import VARIANT_ALPHAS, greedy_sequences
from adaptedge.trainer.methods.polydom.index import build_index
from adaptedge.trainer.methods.polydom.lattice import (
    MAX_SENSORS,
    Accuracy,
    Lattice,
    Prefetch,
    candidates,
    expand_lattice,
    set_polys,
)
from adaptedge.trainer.methods.polydom.progressive import (
    DEFAULT_BUDGET,
    EPSILONS,
    QUICK_BUDGET,
    progressive_lattice,
)
from adaptedge.trainer.methods.registry import INDEXED_METHODS, MethodOptions, register
from adaptedge.trainer.policy.graph import Graph
from adaptedge.trainer.progress import counting, track

__all__ = ["INDEXED_METHODS", "budget_index"]


def sensor_polys(dataset: Any) -> npt.NDArray[np.float64]:
    """[S, D]: each sensor's training-scalar cost as coefficients in the item's size."""
    return size_polynomials(dataset.sensors, dataset.cost_weights)[:, 0, :]


def median_size(dataset: Any) -> float:
    return 0.0 if dataset.sizes is None else float(np.median(dataset.sizes[0]))


def bank_accuracy(bank: ClassifierBank) -> Any:
    y = bank.problem.splits["val"].y
    n = bank.problem.n_sensors

    def accuracy(mask: int) -> float:
        sensors = tuple(s for s in range(n) if mask >> s & 1)
        return float((bank.proba(sensors, "val").argmax(axis=1) == y).mean())

    return accuracy


def bank_prefetch(bank: ClassifierBank, n_jobs: int) -> Prefetch | None:
    """A ``Prefetch`` that fits a layer's sets on ``n_jobs`` processes before they are scored
    (the same models as one by one: ``ClassifierBank.prefetch``); None for one process."""
    if n_jobs <= 1:
        return None
    n = bank.problem.n_sensors

    def prefetch(masks: list[int]) -> None:
        sets = [tuple(s for s in range(n) if mask >> s & 1) for mask in masks]
        bank.prefetch([s for s in sets if s], n_jobs, out_of_fold=False)

    return prefetch


def check_lattice_size(n_sensors: int) -> None:
    """Refuse, before any fit, a lattice too large to expand (``lattice.MAX_SENSORS``)."""
    if n_sensors > MAX_SENSORS:
        raise TrainError(
            f"polydom expands the lattice of all 2^{n_sensors} sets of this data's "
            f"{n_sensors} sensors; it takes at most {MAX_SENSORS}: use --method greedy "
            f"(about n^2/2 sets per trade-off) or group features into fewer sensors (a "
            f"--costs file whose [[sensor]] tables list several features each)")


def _bank(dataset: Any, hpc: Any, options: MethodOptions, extra: Mapping[str, Any]
          ) -> ClassifierBank:
    """The classifier bank of ``extra``'s (checked) ``classifier``."""
    hgb = extra.get("classifier", "lr") == "hgb"
    return ClassifierBank(problem_from(dataset, hpc), kind="hgb" if hgb else "lr",
                          max_iter=30 if options.quick else 60, seed=options.seed)


def _graphs(bank: ClassifierBank, masks: Sequence[int], method: str,
            extra: Mapping[int, str] | None = None, *, progress: bool = False) -> list[Graph]:
    n = bank.problem.n_sensors
    out = []
    for i, mask in track(list(enumerate(masks)), f"{method} graphs", len(masks), progress):
        g = static_graph(bank, tuple(s for s in range(n) if mask >> s & 1))
        g = g.with_validation(evaluate(g, bank, "val"))
        params = dict(g.params, mask=str(mask), **({"seq": extra[mask]} if extra else {}))
        out.append(replace(g, name=f"{method}-{i:03d}", method=method, params=params))
    return out


def _counted(accuracy: Accuracy, method: str, n_sensors: int, progress: bool) -> Accuracy:
    """``accuracy`` reporting each sensor set it scores (at most every set but the empty one)."""
    return counting(accuracy, f"{method} sensor sets scored (at most)", 2 ** n_sensors - 1,
                    progress)


def polydom_graphs(bank: ClassifierBank, dataset: Any, epsilon: float, delta: float = 0.0,
                   accuracy: Accuracy | None = None, progress: bool = False,
                   covering: bool = False, n_jobs: int = 1) -> tuple[list[Graph], int]:
    """PolyDom's candidate graphs and how many sets its lattice expansion expanded (the bank's
    fits on ``n_jobs`` processes when ``accuracy`` is the bank's)."""
    n = bank.problem.n_sensors
    lattice = expand_lattice(n, _counted(accuracy or bank_accuracy(bank), "polydom", n, progress),
                             epsilon=epsilon, delta=delta, covering=covering,
                             prefetch=None if accuracy else bank_prefetch(bank, n_jobs))
    return lattice_graphs(bank, dataset, lattice, progress), lattice.expanded


def lattice_graphs(bank: ClassifierBank, dataset: Any, lattice: Lattice, progress: bool
                   ) -> list[Graph]:
    """One stop-only graph per candidate set of an expanded lattice (Properties 3.6, 3.7)."""
    return _graphs(bank, candidates(lattice, sensor_polys(dataset)), "polydom",
                   progress=progress)


def greedy_graphs(bank: ClassifierBank, dataset: Any, method: str,
                  accuracy: Accuracy | None = None, progress: bool = False
                  ) -> tuple[list[Graph], int]:
    """A Greedy variant's graphs (every set of every sequence) and how many sets it expanded."""
    polys = sensor_polys(dataset)
    costs = polys @ median_size(dataset) ** np.arange(polys.shape[1], dtype=np.float64)
    n = bank.problem.n_sensors
    result = greedy_sequences(n, _counted(accuracy or bank_accuracy(bank), method, n, progress),
                              costs, VARIANT_ALPHAS[method])
    where: dict[int, list[str]] = {}
    for q, seq in enumerate(result.sequences):
        for pos, mask in enumerate(seq):
            where.setdefault(mask, []).append(f"{q}.{pos}")
    graphs = _graphs(bank, list(where), method, {m: " ".join(v) for m, v in where.items()},
                     progress=progress)
    return graphs, result.expanded


@register("polydom")
def train_polydom(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """The candidate sets of PolyDom's pruned lattice, one stop-only graph each. ``--param
    epsilon=E``: that ε exactly; else the progressive modality (``polydom.progressive``): the
    smallest ε down to 0.01 whose expansion scores at most ``--param max_sets=N`` sensor sets
    (default 1,000 with ``--quick``, else 4,000)."""
    extra = check_params("polydom", options.extra)
    check_lattice_size(len(dataset.sensors))
    delta, covering = float(extra.get("delta", 0.0)), bool(extra.get("covering", False))
    bank = _bank(dataset, hpc, options, extra)
    if "epsilon" in extra:
        return polydom_graphs(bank, dataset, float(extra["epsilon"]), delta,
                              progress=options.progress, covering=covering,
                              n_jobs=options.n_jobs)[0]
    budget = int(extra.get("max_sets", QUICK_BUDGET if options.quick else DEFAULT_BUDGET))
    n = bank.problem.n_sensors
    chosen = progressive_lattice(n, _counted(bank_accuracy(bank), "polydom", n, options.progress),
                                 budget, delta=delta, covering=covering,
                                 prefetch=bank_prefetch(bank, options.n_jobs))
    if options.progress:
        print(f"[adaptedge] polydom: epsilon {chosen.epsilon:g} (the smallest of "
              f"{', '.join(f'{e:g}' for e in EPSILONS)} within {budget} sensor sets scored; "
              f"{chosen.lattice.expanded} expanded, {chosen.scored} scored in all)",
              file=sys.stderr, flush=True)
    return lattice_graphs(bank, dataset, chosen.lattice, options.progress)


def _greedy(dataset: Any, hpc: Any, options: MethodOptions, method: str) -> list[Graph]:
    bank = _bank(dataset, hpc, options, check_params(method, options.extra))
    return greedy_graphs(bank, dataset, method, progress=options.progress)[0]


@register("greedy")
def train_greedy(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """Greedy: one nested sequence per trade-off alpha, every prefix exported."""
    return _greedy(dataset, hpc, options, "greedy")


@register("greedy-acc")
def train_greedy_acc(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """GreedyAcc: the most accurate next sensor (alpha 0)."""
    return _greedy(dataset, hpc, options, "greedy-acc")


@register("greedy-cost")
def train_greedy_cost(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """GreedyCost: the cheapest next sensor at the median size."""
    return _greedy(dataset, hpc, options, "greedy-cost")


def worst_case_poly(graph: Graph, dataset: Any) -> npt.NDArray[np.float64]:
    """Coefficients of the most a decision of ``graph`` can cost (every sensor of every node)."""
    names = [s.name for s in dataset.sensors]
    read = {s for node in graph.nodes.values() for s in node.sensors}
    mask = sum(1 << names.index(s) for s in read)
    out: npt.NDArray[np.float64] = set_polys([mask], sensor_polys(dataset))[0]
    return out


def budget_index(method: str, graphs: Sequence[Graph], dataset: Any) -> dict[str, Any]:
    """The bundle's ``budget_index`` over ``graphs`` (all indexed, none dropped)."""
    if any("escalate" in (a.kind for a in n.actions) for g in graphs for n in g.nodes.values()):
        raise ValueError("budget indexes hold stop-only graphs (no escalation)")
    polys = np.array([worst_case_poly(g, dataset) for g in graphs])
    accs = [g.validation.accuracy for g in graphs]
    names = [g.name for g in graphs]
    if method == "polydom":
        return build_index(names, polys, accs).to_dict()
    return greedy_index(names, polys, accs, [str(g.params["seq"]) for g in graphs],
                        median_size(dataset)).to_dict()


def greedy_index(names: Sequence[str], polys: npt.NDArray[np.float64], accs: Sequence[float],
                 seqs: Sequence[str], median: float) -> BudgetIndex:
    """Sequences (by ``"q.pos"`` tags) and the skyline at the median size."""
    models = [IndexedModel(n, float(a), tuple(float(c) for c in p))
              for n, a, p in zip(names, accs, polys, strict=True)]
    placed = [[(int(t.split(".")[0]), int(t.split(".")[1])) for t in s.split()] for s in seqs]
    n_seq = 1 + max(q for tags in placed for q, _ in tags)
    slots: list[list[tuple[int, int]]] = [[] for _ in range(n_seq)]
    for m, tags in enumerate(placed):
        for q, pos in tags:
            slots[q].append((pos, m))
    sequences = [[m for _, m in sorted(seq)] for seq in slots]
    order = sorted(range(len(models)), key=lambda m: (cost_at(models[m].cost, median),
                                                      -models[m].accuracy))
    skyline, best = [], -math.inf
    for m in order:
        if models[m].accuracy > best:
            skyline.append([m, placed[m][0][0]])
            best = models[m].accuracy
    return BudgetIndex("greedy", models, median_size=median, skyline=skyline,
                       sequences=sequences)
