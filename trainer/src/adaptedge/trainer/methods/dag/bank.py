"""The classifier bank: one small classifier per sensor set, with out-of-fold training probabilities.

Graph-Reduce needs, for every node and every training example, the node classifier's answer
as it would be on unseen data, so each entry holds K-fold out-of-fold probabilities on the
training split (the policy's training features and stop losses) next to the model refitted
on all of it (what the device runs, and what scores validation and test). Entries are cached
by sensor set; sweeps over lambda reuse them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from sklearn.base import ClassifierMixin, clone
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from adaptedge.trainer.methods.dag.problem import DagProblem, FloatArray, IntArray, SensorSet

ClassifierKind = Literal["hgb", "hgb-wide", "lr"]
MASKED_KIND: Literal["masked"] = "masked"
"""``ModelSpec.kind`` of the masked model (``trainer.methods.dag.masked``)."""

EARLY_STOP_MIN_ROWS = 1000
"""A fit on fewer rows than this (or with a class of fewer than ``EARLY_STOP_MIN_CLASS_ROWS``)
is too small to hold rows out for early stopping: it grows ``SMALL_FIT_ROUNDS`` rounds."""
EARLY_STOP_MIN_CLASS_ROWS = 10
SMALL_FIT_ROUNDS = 40
EARLY_STOP_FRACTION = 0.1
"""Share of a fit's rows held out to stop boosting (stratified, drawn with the seed)."""
EARLY_STOP_PATIENCE = 10
"""Rounds without a lower held-out log-loss after which boosting stops."""


def can_early_stop(y: Any) -> bool:
    """Whether a fit on labels ``y`` has rows enough to hold some out for early stopping."""
    counts = np.unique(np.asarray(y), return_counts=True)[1]
    return len(y) >= EARLY_STOP_MIN_ROWS and int(counts.min()) >= EARLY_STOP_MIN_CLASS_ROWS


def boosting_rounds(n_classes: int, trees: int, floor: int) -> int:
    """Rounds a tree budget buys: one tree a round for two classes, ``n_classes`` beyond."""
    per_round = 1 if n_classes <= 2 else n_classes
    return max(floor, trees // per_round)


def make_classifier(kind: ClassifierKind, *, max_iter: int, seed: int,
                    early_stopping: bool = False) -> ClassifierMixin:
    """A node classifier. ``early_stopping``: ``max_iter`` is a cap, and boosting stops once
    the log-loss on ``EARLY_STOP_FRACTION`` of the rows stops falling (hgb kinds only)."""
    if kind in ("hgb", "hgb-wide"):
        wide = kind == "hgb-wide"
        return HistGradientBoostingClassifier(
            max_iter=max_iter, learning_rate=0.3 if wide else 0.15,
            max_leaf_nodes=31 if wide else 15, min_samples_leaf=10,
            l2_regularization=1.0, early_stopping=early_stopping,
            validation_fraction=EARLY_STOP_FRACTION, n_iter_no_change=EARLY_STOP_PATIENCE,
            random_state=seed)
    if kind == "lr":
        return make_pipeline(StandardScaler(),
                             LogisticRegression(C=1.0, max_iter=500))
    raise ValueError(f"unknown classifier kind {kind!r}; choose 'hgb', 'hgb-wide' or 'lr'")


def make_masked_classifier(*, max_iter: int, seed: int) -> HistGradientBoostingClassifier:
    """The masked model: wider than a per-subset tree, since it serves every sensor set."""
    return HistGradientBoostingClassifier(
        max_iter=max_iter, learning_rate=0.2, max_leaf_nodes=31, min_samples_leaf=20,
        l2_regularization=1.0, early_stopping=False, random_state=seed)


@dataclass(frozen=True)
class ModelSpec:
    """What a bank's fit depends on besides its rows: classifier kind, rounds, seed, stopping."""

    kind: ClassifierKind | Literal["masked"]
    max_iter: int
    seed: int
    early_stopping: bool


def new_model(spec: ModelSpec, y: Any) -> Any:
    """An unfitted model for labels ``y`` (which decide whether it may stop early)."""
    kind = spec.kind
    if kind == MASKED_KIND:
        return clone(make_masked_classifier(max_iter=spec.max_iter, seed=spec.seed))
    rounds, stop_early = spec.max_iter, spec.early_stopping
    if stop_early and not can_early_stop(y):
        rounds, stop_early = min(spec.max_iter, SMALL_FIT_ROUNDS), False
    return clone(make_classifier(kind, max_iter=rounds, seed=spec.seed,
                                 early_stopping=stop_early))


def fit_model(model: Any, X: Any, y: Any) -> Any:
    """``model`` fitted on ``X``, ``y``, its thresholds rounded to the float32 its ONNX export
    holds."""
    # one OpenMP and one BLAS thread: on a shared 2-core machine more threads only spin (an
    # lbfgs logistic fit on gas: 5.5 s wall with two BLAS threads beside a busy core, 0.16 s)
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    round_thresholds_to_float32(model)
    return model


FitJob = tuple[ModelSpec, Any, IntArray, tuple[int, ...], IntArray | None]
"""(spec, training X, training y, the set's columns, the rows to fit on or None: all)."""


def prefetch_models(banks: Sequence[ClassifierBank], sets: Sequence[SensorSet], n_jobs: int,
                    extra: Sequence[FitJob] = ()) -> list[Any]:
    """Fit every bank's models of ``sets`` not fitted yet (no fold models), all in one pool of
    up to ``n_jobs`` processes: the models first use would fit (``ClassifierBank.prefetch``).
    ``extra``: more fits for the same pool (started first: meant for long ones); their
    models are returned, in order."""
    jobs = [(bank, key) for bank in banks for key in bank._unfitted(sets)]
    # the extra fits first: the longest start first, so no core idles at the pool's end
    models = fit_jobs([*extra, *[bank._job(key, None) for bank, key in jobs]], n_jobs)
    for (bank, key), model in zip(jobs, models[len(extra):], strict=True):
        bank._store(key, model)
    return models[:len(extra)]


def fit_jobs(jobs: Sequence[FitJob], n_jobs: int) -> list[Any]:
    """``_fit_job`` of each job on up to ``n_jobs`` processes (``trainer.parallel``)."""
    from adaptedge.trainer.parallel import parallel_map

    return parallel_map(_fit_job, list(jobs), n_jobs, False, "dag classifier bank")


def _fit_job(job: FitJob) -> Any:
    """``fit_model`` on a worker: the training rows ``rows`` (None: all) of ``columns``,
    sliced as ``ClassifierBank._fit`` and ``_out_of_fold`` slice them."""
    spec, X, y, columns, rows = job
    Xc = X[:, list(columns)]
    if rows is not None:
        Xc, y = Xc[rows], y[rows]
    return fit_model(new_model(spec, y), Xc, y)


def round_thresholds_to_float32(model: Any) -> None:
    """Make a fitted HistGradientBoosting split exactly as its float32 ONNX export does.

    ONNX stores thresholds as float32; for float32 inputs ``x <= t`` equals ``x <= t32`` when
    ``t32`` is the largest float32 not above ``t``, so the sklearn model is given that value.
    """
    est = model[-1] if isinstance(model, Pipeline) else model
    for per_class in getattr(est, "_predictors", []):
        for predictor in per_class:
            nodes = predictor.nodes
            t = nodes["num_threshold"]
            t32 = t.astype(np.float32)
            above = t32.astype(np.float64) > t
            t32[above] = np.nextafter(t32[above], np.float32(-np.inf))
            nodes["num_threshold"] = t32.astype(np.float64)


@dataclass
class PriorModel:
    """The classifier of the empty sensor set: the training class frequencies."""

    proba: FloatArray

    def predict_proba(self, X: Any) -> FloatArray:
        return np.tile(self.proba, (len(X), 1))


@dataclass
class BankEntry:
    sensors: SensorSet
    columns: tuple[int, ...]
    model: Any
    """Fitted on the whole training split (``PriorModel`` for the empty set)."""
    proba: dict[str, FloatArray] = field(default_factory=dict)
    """Per split: out-of-fold on ``train``, the refitted model's on the others."""


class ClassifierBank:
    """Fits and caches ``BankEntry``s by sensor set.

    ``early_stopping``: boosted models grow at most ``max_iter`` rounds and stop when the
    log-loss on a held-out tenth of their fit rows stops falling, so each sensor set gets the
    rounds its data supports; fits too small to hold rows out (``can_early_stop``) grow
    ``min(max_iter, SMALL_FIT_ROUNDS)`` rounds. Without it every model grows ``max_iter``.
    """

    def __init__(self, problem: DagProblem, *, kind: ClassifierKind = "hgb", max_iter: int = 60,
                 n_folds: int = 3, seed: int = 0, early_stopping: bool = False) -> None:
        self.problem = problem
        self.model_kind: ClassifierKind = kind
        self.kind: str = kind
        """How reports name the bank (subclasses: "masked", "per-node(...)")."""
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.n_folds = n_folds
        self.seed = seed
        self._entries: dict[SensorSet, BankEntry] = {}
        self._fits = 0
        self.kind_scores: dict[str, float] = {}
        """Validation accuracy with every sensor of each kind compared (``choose_bank``)."""

    @property
    def fits(self) -> int:
        """How many models were fitted (fold models included)."""
        return self._fits

    def summary(self) -> dict[str, object]:
        """What the bank is, for reports: its kind and how many sensor sets it has fitted."""
        out: dict[str, object] = {"kind": self.kind, "entries": len(self), "fits": self.fits}
        if self.kind_scores:
            out["kind_scores"] = dict(self.kind_scores)
        return out

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, sensors: SensorSet) -> BankEntry:
        key = tuple(sorted(sensors))
        if key not in self._entries:
            self._entries[key] = self._fit(key)
        return self._entries[key]

    def proba(self, sensors: SensorSet, split: str) -> FloatArray:
        """Probabilities on a split: out-of-fold on ``train`` (fitted on first use)."""
        entry = self.get(sensors)
        if split not in entry.proba:
            if split == "train":
                entry.proba[split] = self._out_of_fold(entry)
            else:
                X = self.problem.splits[split].X[:, list(entry.columns)]
                entry.proba[split] = self._predict(entry.model, X)
        return entry.proba[split]

    def predict(self, sensors: SensorSet, X: Any) -> FloatArray:
        """Probabilities of ``sensors``' refitted model on rows ``X`` (its columns only)."""
        return self._predict(self.get(sensors).model, X)

    # -- fitting -------------------------------------------------------------------------------
    def _fit(self, sensors: SensorSet) -> BankEntry:
        train = self.problem.splits["train"]
        columns = self.problem.columns(sensors)
        if not columns:
            counts = np.bincount(train.y, minlength=self.problem.n_classes) + 1.0
            prior = PriorModel(counts / counts.sum())
            return BankEntry(sensors, columns, prior, {"train": prior.predict_proba(train.X)})
        return BankEntry(sensors, columns, self._fit_one(train.X[:, list(columns)], train.y))

    def _out_of_fold(self, entry: BankEntry) -> FloatArray:
        train = self.problem.splits["train"]
        X = train.X[:, list(entry.columns)]
        oof = np.zeros((len(X), self.problem.n_classes))
        folds = KFold(self.n_folds, shuffle=True, random_state=self.seed)
        for fit_rows, held_rows in folds.split(X):
            model = self._fit_one(X[fit_rows], train.y[fit_rows])
            oof[held_rows] = self._predict(model, X[held_rows])
        return oof

    def _spec(self) -> ModelSpec:
        return ModelSpec(self.model_kind, self.max_iter, self.seed, self.early_stopping)

    def _new_model(self, y: Any) -> Any:
        """An unfitted model for labels ``y`` (which decide whether it may stop early)."""
        return new_model(self._spec(), y)

    def _fit_one(self, X: Any, y: Any) -> Any:
        self._fits += 1
        return fit_model(self._new_model(y), X, y)

    def prefetch(self, sets: Sequence[SensorSet], n_jobs: int, *, out_of_fold: bool = True
                 ) -> None:
        """Fit what ``proba(s, "val")`` (and, with ``out_of_fold``, ``proba(s, "train")``)
        would fit for each set ``s`` of ``sets``, on up to ``n_jobs`` processes
        (``trainer.parallel``): the same models and probabilities as fitting them one by one
        on first use (each fit depends on its rows and the seed only)."""
        keys = list(dict.fromkeys(tuple(sorted(s)) for s in sets))
        prefetch_models([self], keys, n_jobs)
        for key in keys:
            self.proba(key, "val")
        if out_of_fold:
            self._prefetch_out_of_fold([self.get(k) for k in keys], n_jobs)

    def _unfitted(self, sets: Sequence[SensorSet]) -> list[SensorSet]:
        """The sets (sorted, once each) whose model is not fitted yet (the empty set's prior
        needs no fit)."""
        keys = dict.fromkeys(tuple(sorted(s)) for s in sets)
        return [k for k in keys if k not in self._entries and self.problem.columns(k)]

    def _job(self, key: SensorSet, rows: IntArray | None) -> FitJob:
        train = self.problem.splits["train"]
        return self._spec(), train.X, train.y, self.problem.columns(key), rows

    def _store(self, key: SensorSet, model: Any) -> None:
        self._fits += 1
        self._entries[key] = BankEntry(key, self.problem.columns(key), model)

    def _prefetch_out_of_fold(self, entries: Sequence[BankEntry], n_jobs: int,
                              extra: Sequence[FitJob] = ()) -> list[Any]:
        """The fold models of ``entries`` (and the ``extra`` fits, returned) in one pool."""
        todo = [e for e in entries if "train" not in e.proba]
        n_rows = len(self.problem.splits["train"].y)
        folds = list(KFold(self.n_folds, shuffle=True, random_state=self.seed).split(
            np.zeros((n_rows, 1))))
        jobs = [self._job(e.sensors, fit_rows) for e in todo for fit_rows, _ in folds]
        self._fits += len(jobs)
        fitted = fit_jobs([*extra, *jobs], n_jobs)  # the (long) extra fits first
        models = iter(fitted[len(extra):])
        X = self.problem.splits["train"].X
        for entry in todo:
            oof = np.zeros((n_rows, self.problem.n_classes))
            for _, held_rows in folds:
                oof[held_rows] = self._predict(next(models), X[held_rows][:, list(entry.columns)])
            entry.proba["train"] = oof
        return fitted[:len(extra)]

    def _predict(self, model: Any, X: Any) -> FloatArray:
        """Probabilities over all ``n_classes`` (a fold may have missed a rare class)."""
        with threadpool_limits(limits=1):
            raw = np.asarray(model.predict_proba(X), dtype=np.float64)
        if raw.shape[1] == self.problem.n_classes:
            return raw
        full = np.zeros((len(X), self.problem.n_classes))
        full[:, np.asarray(model.classes_, dtype=np.int64)] = raw
        return full
