"""One call from data to bundle: load the dataset, fit the HPC, run a method's sweep, keep the
validation frontier, choose the default operating point, export and verify the bundle."""

from __future__ import annotations

import math
import platform
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from adaptedge.protocol.bundle import check_target, verify
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.method_sequences import (
    SEQUENCES_KEY,
    MethodSequence,
    alpha_shares,
    cheapest_certified,
    method_groups,
    method_sequences,
    sequences_record,
)
from adaptedge.protocol.operating_points import (
    PairedCounts,
    fixed_sequence,
    most_accurate,
    rows_to_certify,
)
from adaptedge.trainer.data.bundle_data import SIZE_COLUMN_KEY, TARGET_COLUMN_KEY
from adaptedge.trainer.data.costs import size_column
from adaptedge.trainer.data.csv_dataset import check_training_classes
from adaptedge.trainer.data.data_files import MissingValueError
from adaptedge.trainer.data.datasets import Dataset, load_dataset
from adaptedge.trainer.data.frames import tabular_source
from adaptedge.trainer.data.impute import IMPUTERS
from adaptedge.trainer.data.impute import impute as impute_missing
from adaptedge.trainer.data.splits import (
    CERTIFY_KEY,
    DEFAULT_CERTIFY_FRACTION,
    hold_out_certify,
    split_recipe,
    with_val_fraction,
)
from adaptedge.trainer.errors import TrainError as TrainError
from adaptedge.trainer.export.bundle import Chooser, export_bundle
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.hpc_check import weak_hpc_warning
from adaptedge.trainer.methods.params import check_params
from adaptedge.trainer.methods.polydom.method import check_lattice_size
from adaptedge.trainer.methods.registry import (
    INDEXED_METHODS,
    LEARNS_MISSING,
    MethodOptions,
    get_method,
)
from adaptedge.trainer.methods.regression import check_regression_method
from adaptedge.trainer.methods.with_quick import run_sweep
from adaptedge.trainer.parallel import use_cluster
from adaptedge.trainer.policy.frontier import (
    BudgetError,
    kept_summary,
    pareto_frontier,
    pick_certified,
    pick_within_budget,
)

DEFAULT_TOLERANCE = 0.01
"""The default operating point is the cheapest within this accuracy of the HPC (validation)."""


def choose_default(frontier: list[Any], paired: Sequence[PairedCounts], budget: float | None,
                   *, total_rows: int | None = None, selection_rows: int = 0,
                   hpc_accuracy: float | None = None) -> tuple[Any, str, bool | None]:
    """The default operating point, the rule that chose it in words, and whether the paired
    rule certified it (``None`` under a budget). ``paired``: each point's outcomes against the
    HPC on the certify rows no fit and no choice of the sweep saw (``selection_rows``: how many
    validation rows chose the front; ``export.bundle.paired_on_rows``), or with
    ``selection_rows`` 0 on the rows that chose the front (``paired_on_validation``: not valid
    under selection). The sequence runs by the points' validation cost (selection rows). When
    nothing is certified, the default is the most accurate point on every validation row
    (selection and certify: no guarantee is claimed, so the certify rows help choose), the
    cheaper on ties. ``total_rows``: all rows of the data, to suggest ``--val-fraction``. A
    budget below every point keeps the finished run: the cheapest point, with a warning.
    A front merged from several methods (``--method auto``; each point's ``method``) is tested
    in one fixed sequence per method (``default_sequences``; ``hpc_accuracy``: the HPC's on
    the selection rows, which fix each method's alpha share; ``None``: equal shares)."""
    if budget is not None:
        return _within_budget(frontier, budget)
    return _certified_default(frontier, paired, default_sequences(frontier, paired, hpc_accuracy),
                              total_rows, selection_rows)


def _certified_default(frontier: list[Any], paired: Sequence[PairedCounts],
                       sequences: list[MethodSequence] | None, total_rows: int | None,
                       selection_rows: int) -> tuple[Any, str, bool]:
    """``choose_default`` without a budget, given ``default_sequences``' result (``None``:
    one method, its one fixed sequence)."""
    if sequences is not None:
        return _by_method(frontier, paired, sequences, selection_rows, total_rows)
    bounds = [c.lower_bound for c in paired]
    passed = fixed_sequence([p.validation for p in frontier], bounds, DEFAULT_TOLERANCE)
    rows = "held-out certify" if selection_rows else "validation"
    if passed:
        point = pick_certified(frontier, bounds, DEFAULT_TOLERANCE)
        at = next(k for k, p in enumerate(frontier) if p is point)
        return point, (f"the cheapest point within {DEFAULT_TOLERANCE:g} of the HPC's "
                       f"accuracy with 97.5% confidence (paired lower bound "
                       f"{bounds[at]:+.4f} on its accuracy minus the HPC's, on the same "
                       f"{int(paired[at].n)} {rows} rows; fixed-sequence test from the "
                       f"most expensive point: {len(passed)} of {len(frontier)} passed "
                       f"before the first failure)"), True
    return _most_accurate(frontier, paired, selection_rows, total_rows, rows)


def _most_accurate(frontier: list[Any], paired: Sequence[PairedCounts], selection_rows: int,
                   total_rows: int | None, rows: str) -> tuple[Any, str, bool]:
    """Nothing certified: the most accurate point on every validation row, the cheaper on
    ties, and the ``not_certified`` line."""
    overall = [_Scored((p.validation.accuracy * selection_rows + c.both + c.point_only)
                       / (selection_rows + c.n) if selection_rows and c.n else
                       p.validation.accuracy, p.validation.cost)
               for p, c in zip(frontier, paired, strict=True)]
    i = most_accurate(overall)
    if i is None:
        raise BudgetError("no operating points to choose from")
    share = paired[i].n / (paired[i].n + selection_rows) if paired[i].n else 1.0
    return frontier[i], not_certified(paired[i], DEFAULT_TOLERANCE, total_rows, rows,
                                      share), False


def default_sequences(frontier: list[Any], paired: Sequence[PairedCounts],
                      hpc_accuracy: float | None) -> list[MethodSequence] | None:
    """The per-method fixed sequences of a front merged from several methods
    (``protocol.method_sequences``: alpha shares fixed on the selection rows' validation
    figures, each method's points tested most expensive first on the ``paired`` rows);
    ``None`` for a front from one method (its rule: the one sequence at the whole alpha)."""
    methods = [getattr(p, "method", None) for p in frontier]
    if len(method_groups(methods)) <= 1:
        return None
    scored = [p.validation for p in frontier]
    reference = math.inf if hpc_accuracy is None else hpc_accuracy  # inf: none screened
    shares = alpha_shares(scored, methods, reference, DEFAULT_TOLERANCE)
    return method_sequences(scored, paired, methods, shares, DEFAULT_TOLERANCE)


def _by_method(frontier: list[Any], paired: Sequence[PairedCounts],
               sequences: list[MethodSequence], selection_rows: int,
               total_rows: int | None) -> tuple[Any, str, bool]:
    """``choose_default`` on per-method sequences: the cheapest point any certified."""
    rows = "held-out certify" if selection_rows else "validation"
    found = cheapest_certified([p.validation for p in frontier], sequences)
    if found is None:
        return _most_accurate(frontier, paired, selection_rows, total_rows, rows)
    at, seq = found
    k = seq.order.index(at)
    bound, level = seq.bounds[k], seq.levels[k]
    tested = sum(1 for s in sequences if s.alpha > 0)
    return frontier[at], (
        f"the cheapest point within {DEFAULT_TOLERANCE:g} of the HPC's accuracy with 97.5% "
        f"confidence, certified by the {seq.method or 'unnamed'} method's sequence (paired "
        f"lower bound {bound:+.4f} at one-sided level {1 - level:.4f}, on the same "
        f"{int(paired[at].n)} {rows} rows; one fixed sequence per method from its most "
        f"expensive point, the one-sided 0.025 shared by {tested} of {len(sequences)} methods "
        f"(weighted Bonferroni, a finished sequence's share passed on): {seq.passed} of its "
        f"{len(seq.order)} points passed)"), True


class _Scored:
    """A point's accuracy (on every validation row) and validation cost."""

    def __init__(self, accuracy: float, cost: float) -> None:
        self.accuracy, self.cost = accuracy, cost


def _within_budget(frontier: list[Any], budget: float) -> tuple[Any, str, None]:
    """``choose_default`` under ``--budget``: the most accurate point within it, else the
    cheapest with a warning on stderr."""
    try:
        return pick_within_budget(frontier, budget), (
            f"the most accurate point with validation cost <= --budget {budget:g}"), None
    except BudgetError as exc:
        point = min(frontier, key=lambda p: p.validation.cost)
        print(f"adaptedge: warning: {exc}; the bundle is written anyway with the cheapest point "
              f"as default (choose another at run time: edge run --budget/--operating-point)",
              file=sys.stderr)
        return point, (f"the cheapest point: --budget {budget:g} is below every point "
                       f"(the cheapest costs {point.validation.cost:.4g})"), None


def not_certified(counts: PairedCounts, tolerance: float, total_rows: int | None,
                  rows_name: str = "validation", share: float = 1.0) -> str:
    """One line: nothing is certified, the default is the most accurate point (``counts``:
    its paired outcomes on the ``rows_name`` rows, ``share`` of the validation rows), and how
    many such rows would certify it."""
    n = int(counts.n)
    hpc = (counts.both + counts.hpc_only) / n if n else 0.0
    head = (f"NOT certified: no point is within {tolerance:g} of the HPC with 97.5% confidence "
            f"(fixed-sequence test from the most expensive point) "
            f"on {n} {rows_name} rows; the default is the most accurate point "
            f"({hpc + counts.difference:.4f} vs the HPC's {hpc:.4f}, "
            f"exactly one of the two right on {int(counts.point_only + counts.hpc_only)} of "
            f"them)")
    rows = rows_to_certify(counts, tolerance)
    if rows is None:
        return f"{head}; no number of {rows_name} rows would certify it at that difference"
    hint = ""
    if total_rows:
        wanted = math.ceil(100 * rows / share / total_rows) / 100
        hint = (f" (train --val-fraction {wanted:.2f})" if wanted <= 0.6 else
                f" (more than --val-fraction can give: {total_rows} rows in all)")
    return f"{head}; it would need about {rows} {rows_name} rows at its observed discordance{hint}"


def default_chooser(frontier: list[Any], budget: float | None, *,
                    total_rows: int | None = None, selection_rows: int = 0,
                    hpc_accuracy: float | None = None) -> Chooser:
    """``export_bundle``'s ``choose``: ``choose_default`` on the points' paired counts, the
    rule in ``metadata["default_rule"]`` and ``metadata["certified"]``; a front from several
    methods also records its per-method sequences (``metadata["certify_sequences"]``,
    ``protocol.method_sequences.sequences_record``: what ``adaptedge evaluate`` re-checks)."""

    def choose(paired: list[PairedCounts]) -> tuple[str, dict[str, Any]]:
        sequences = default_sequences(frontier, paired, hpc_accuracy)  # once: rule and record
        point, rule, certified = (
            _within_budget(frontier, budget) if budget is not None else
            _certified_default(frontier, paired, sequences, total_rows, selection_rows))
        extra: dict[str, Any] = {"default_rule": rule, "certified": certified}
        if sequences is not None:
            extra[SEQUENCES_KEY] = sequences_record(sequences, [p.name for p in frontier],
                                                    DEFAULT_TOLERANCE)
        return point.name, extra

    return choose


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for dist in ("adaptedge", "numpy", "scikit-learn", "onnx", "onnxruntime", "skl2onnx",
                 "lightgbm"):  # lightgbm: the trees of --method cegb
        try:
            versions[dist] = importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return versions


def train_bundle(data: Any, method: str, out: str | Path, *, target: str | None = None,
                 costs: str | Path | None = None, grouping: str | None = None,
                 budget: float | None = None, quick: bool = False, seed: int = 0,
                 n_jobs: int = 1, progress: bool = True, hpc_kind: Any = "auto",
                 hpc_onnx: str | Path | None = None, extra: Mapping[str, Any] | None = None,
                 force: bool = False, cluster: str | None = None,
                 val_fraction: float | None = None, impute: str | None = None,
                 task: str | None = None, tolerance: float | None = None,
                 certify_fraction: float | None = None) -> Manifest:
    """Train ``method`` on ``data`` and write a verified bundle to ``out``; returns its manifest.

    ``data``: a built-in dataset name, a CSV/TSV path (with ``target``), a pandas DataFrame
    (with ``target``) or an ``(X, y)`` pair (``trainer.data.frames``).

    The bundle holds the validation frontier of the method's sweep. The default operating
    point is the most accurate within ``budget`` when given, else the cheapest certified within
    1% of the HPC's validation accuracy with 97.5% confidence (a paired lower bound on the
    difference on the same validation rows, tested in a fixed sequence from the most expensive
    point, ``protocol.operating_points.certified_near``; else the most accurate), the bounds
    measured on ``certify_fraction`` of the validation rows (default
    ``data.splits.DEFAULT_CERTIFY_FRACTION``, 0.5) held out from every fit and every choice of
    the sweep (the front is chosen on the rest); 0: no hold-out, the bounds on the rows that
    chose the front (not valid under selection). ``val_fraction``: re-draw validation from the training rows to hold
    this share of all rows (test unchanged; default: the dataset's split). Missing cells (empty
    or ``nan``: sensors not measured on that row) are learnt by the methods in
    ``LEARNS_MISSING`` and walked as failed reads, as on a device; another method refuses them
    unless ``impute="median"`` fills them (``trainer.data.impute``). Method, dataset,
    seed and library versions go into the manifest metadata; wall-clock timings do not (the same
    inputs and seed give the same bundle id; time the call to know how long it took). ``out`` must be new, an
    empty directory or, with ``force``, a bundle to replace (checked before training).
    ``n_jobs``: local processes for the sweep's fits (default 1: all in this process, as a
    library call should not take the machine unasked; ``adaptedge train --jobs`` defaults to
    ``trainer.parallel.usable_cores()``). The bundle is the same for any ``n_jobs``.
    ``cluster``: a Dask scheduler address (``tcp://HOST:PORT``) that runs the sweep's fits
    (``trainer.parallel``); ``n_jobs`` still sizes the work done here.
    ``task="regression"`` (or a regression built-in such as ``gas-concentration``): a numeric
    target, a regression bundle (``trainer.regression_bundle``; ``tolerance``: the paired
    error rule's, on MAE in the target's unit, default 5% of the HPC's validation MAE).
    """
    with tabular_source(data, target) as (source, column):
        return _train_bundle(source, method, out, target=column, costs=costs,
                             grouping=grouping, budget=budget, quick=quick, seed=seed,
                             n_jobs=n_jobs, progress=progress, hpc_kind=hpc_kind,
                             hpc_onnx=hpc_onnx, extra=extra, force=force, cluster=cluster,
                             val_fraction=val_fraction, impute=impute, task=task,
                             tolerance=tolerance, certify_fraction=certify_fraction)


def _train_bundle(data: str, method: str, out: str | Path, *, target: str | None,
                  costs: str | Path | None, grouping: str | None, budget: float | None,
                  quick: bool, seed: int, n_jobs: int, progress: bool, hpc_kind: Any,
                  hpc_onnx: str | Path | None, extra: Mapping[str, Any] | None,
                  force: bool, cluster: str | None, val_fraction: float | None,
                  impute: str | None, task: str | None = None,
                  tolerance: float | None = None,
                  certify_fraction: float | None = None) -> Manifest:
    out = check_target(out, force=force)  # absolute: "--out ." stays valid once replaced
    if task == "regression":
        check_regression_method(method)  # before any fit
    # One BLAS thread in this process: the sweep's parallel unit is the process (``n_jobs``),
    # its matrices are small, and OpenBLAS's threads spin whenever the other core is busy
    # (gas greedy-acc --quick: 274.9 s wall with two BLAS threads at load 3, 10.1 s with one).
    with use_cluster(cluster), threadpool_limits(limits=1, user_api="blas"):
        return _train(data, method, out, target=target, costs=costs, grouping=grouping,
                      budget=budget, quick=quick, seed=seed, n_jobs=n_jobs, progress=progress,
                      hpc_kind=hpc_kind, hpc_onnx=hpc_onnx, extra=extra, force=force,
                      val_fraction=val_fraction, impute=impute, task=task,
                      tolerance=tolerance, certify_fraction=certify_fraction)


def _train_regression(dataset: Dataset, method: str, out: Path, *, target: str | None,
                      budget: float | None, quick: bool, seed: int, n_jobs: int,
                      hpc_kind: Any, extra: Mapping[str, Any], force: bool,
                      tolerance: float | None) -> Manifest:
    """A regression bundle (``trainer.regression_bundle``) of ``method`` on ``dataset``."""
    from adaptedge.trainer.regression_bundle import train_regression

    check_regression_method(method)
    if extra:
        raise TrainError(f"--param is not supported with --task regression yet (got "
                         f"{sorted(extra)}); the sweep is the method's own")
    meta: dict[str, Any] = {
        "method": method, "dataset": dataset.name,
        "dataset_description": dataset.description, "seed": seed, "quick": quick,
        "budget": budget, "library_versions": library_versions(),
        **({TARGET_COLUMN_KEY: target} if target else {})}
    return train_regression(dataset, method, out, seed=seed, quick=quick, n_jobs=n_jobs,
                            hpc_kind=str(hpc_kind), budget=budget, tolerance=tolerance,
                            metadata=meta, force=force, split=split_recipe(dataset, seed))


def _load(data: str, method: str, impute: str | None, **kwargs: Any) -> Dataset:
    """The dataset, its missing cells kept for a method that learns them, else imputed with
    ``impute`` or refused in one line naming the method and the first missing cell."""
    learns = method in LEARNS_MISSING
    if impute is not None and impute not in IMPUTERS:
        raise TrainError(f"unknown imputation {impute!r}; choose one of {list(IMPUTERS)}")
    try:
        dataset = load_dataset(data, missing=learns or impute is not None, **kwargs)
    except MissingValueError as exc:
        raise MissingValueError(f"method {method!r} cannot learn from missing values: {exc}"
                                ) from exc
    return dataset if impute is None else impute_missing(dataset, impute)


def _train(data: str, method: str, out: Path, *, target: str | None,
           costs: str | Path | None, grouping: str | None, budget: float | None, quick: bool,
           seed: int, n_jobs: int, progress: bool, hpc_kind: Any, hpc_onnx: str | Path | None,
           extra: Mapping[str, Any] | None, force: bool, val_fraction: float | None,
           impute: str | None, task: str | None = None,
           tolerance: float | None = None,
           certify_fraction: float | None = None) -> Manifest:
    show = progress  # a bar on a terminal, periodic log lines otherwise (trainer.progress)
    method_fn = get_method(method)
    extra = check_params(method, extra or {})  # before any fit: a typo costs no training
    dataset = _load(data, method, impute, target=target, costs=costs, grouping=grouping,
                    seed=seed, task=task)
    if val_fraction is not None:
        dataset = with_val_fraction(dataset, val_fraction, seed)
    if dataset.is_regression:
        if certify_fraction is not None:
            raise TrainError("--certify-fraction applies to classification; regression bounds "
                             "its default point on all validation rows (protocol.error_rule)")
        return _train_regression(dataset, method, out, target=target, budget=budget,
                                 quick=quick, seed=seed, n_jobs=n_jobs, hpc_kind=hpc_kind,
                                 extra=extra, force=force, tolerance=tolerance)
    if tolerance is not None:
        raise TrainError("--tolerance applies to regression (--task regression); "
                         "classification keeps its 0.01 accuracy tolerance")
    check_training_classes(data, dataset.classes, dataset.y_train)
    if method == "polydom":
        check_lattice_size(len(dataset.sensors))  # before the HPC's fit
    recipe, total_rows = split_recipe(dataset, seed), _total_rows(dataset)
    dataset, certify, certify_meta = _hold_out(dataset, certify_fraction, seed)
    hpc = fit_hpc(dataset, kind=hpc_kind, seed=seed, n_jobs=n_jobs, onnx_path=hpc_onnx,
                  progress=show)
    options = MethodOptions(seed=seed, n_jobs=n_jobs, progress=show, quick=quick,
                            extra=dict(extra or {}))
    # a method may return its own Front; a default sweep adds --quick's (methods.with_quick)
    candidates = run_sweep(method, method_fn, dataset, hpc, options)
    if not candidates:
        raise TrainError(f"method {method!r} found no policy on {dataset.name} (no fitted model "
                         f"reads a sensor; {len(dataset.y_train)} training rows): give it more "
                         f"rows or try another method")
    method_meta = dict(getattr(candidates, "metadata", None) or {})  # e.g. auto's plan
    front = pareto_frontier(candidates)
    swept, frontier = front.swept, list(front)
    if weak := weak_hpc_warning(hpc.val_accuracy, dataset.y_train, dataset.y_val, frontier):
        print(weak, file=sys.stderr)
    kept = kept_summary(len(frontier), swept)
    index = None
    if method in INDEXED_METHODS:  # every indexed model ships: it may be best at some size
        from adaptedge.trainer.methods.polydom.method import budget_index

        index = budget_index(method, candidates, dataset)
        frontier = list(candidates)
        kept = f"kept all {swept} candidate models: each may be best at some item size"
    meta: dict[str, Any] = {
        "method": method,
        "dataset": dataset.name,
        "dataset_description": dataset.description,
        "seed": seed,
        "quick": quick,
        "budget": budget,
        "n_candidates": swept,
        "frontier_rule": kept,
        "library_versions": library_versions(),
        **({SIZE_COLUMN_KEY: size_column(costs)} if dataset.sizes is not None and costs else {}),
        **({TARGET_COLUMN_KEY: target} if target else {}),
        "extra": {k: v if isinstance(v, int | float | str | bool) else repr(v)
                  for k, v in sorted((extra or {}).items())},
        **method_meta, **certify_meta,
    }
    export_bundle(out, dataset, hpc, frontier, metadata=meta, force=force, budget_index=index,
                  split=recipe, certify=certify,
                  choose=default_chooser(frontier, budget, total_rows=total_rows,
                                         selection_rows=0 if certify is None
                                         else len(dataset.y_val),
                                         hpc_accuracy=hpc.val_accuracy))
    return verify(out)


def _total_rows(dataset: Dataset) -> int:
    return len(dataset.y_train) + len(dataset.y_val) + len(dataset.y_test)


def _hold_out(dataset: Dataset, fraction: float | None, seed: int
              ) -> tuple[Dataset, tuple[Any, Any] | None, dict[str, Any]]:
    """``dataset`` with its certify rows held out (``data.splits.hold_out_certify``; ``None``:
    the default fraction, 0: none), those rows, and the manifest's record of them
    (``metadata[CERTIFY_KEY]``: fraction, rows and seed, for ``adaptedge evaluate``)."""
    fraction = DEFAULT_CERTIFY_FRACTION if fraction is None else fraction
    if fraction == 0:
        return dataset, None, {}
    rest, certify = hold_out_certify(dataset, fraction, seed)
    record = {"fraction": fraction, "rows": len(certify[1]), "seed": seed}
    return rest, certify, {CERTIFY_KEY: record}
