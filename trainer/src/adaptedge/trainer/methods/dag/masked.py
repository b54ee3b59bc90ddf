"""One classifier for every sensor set, and the per-node choice between it and per-subset models.

``MaskedBank`` fits ONE histogram gradient-boosting model on the training split with sensors
hidden: every row appears once with every sensor and ``replicas - 1`` more times with a random
sensor subset kept and the other sensors' columns set to NaN (half of the subsets drawn from
the lattice's node sets, half random of a random size). Boosting routes NaN down a learned
side at each split, so one model answers with any subset. At a node the model is
*specialised* to the node's columns (``specialise``): every split on a hidden column is
replaced by the branch NaN takes, giving an ordinary model whose input is the node's columns
only. It predicts exactly as the masked model with NaN in the hidden columns, and exports
like any per-subset model (one ONNX graph, input ``x`` = the node's columns).

Graph-Reduce's out-of-fold probabilities stay honest: one fold model per K-fold split, fitted
on masked replicas of the other folds' rows only and queried on the held-out rows with the
node's hidden columns set to NaN. The masked models are fitted once per bank, not per node.

``ChoiceBank`` keeps, for each sensor set, the per-subset model or the masked model, whichever
has the lower validation log-loss on that set, and records which.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import KFold

from adaptedge.trainer.methods.dag.bank import (
    MASKED_KIND,
    BankEntry,
    ClassifierBank,
    FitJob,
    ModelSpec,
    make_masked_classifier,
    prefetch_models,
)
from adaptedge.trainer.methods.dag.problem import (
    BoolArray,
    DagProblem,
    FloatArray,
    IntArray,
    SensorSet,
)
from adaptedge.trainer.methods.gating import hpc_loss

__all__ = ["MASKED_KIND", "ChoiceBank", "MaskedBank", "make_masked_classifier"]


def column_sensor(problem: DagProblem) -> IntArray:
    """The sensor owning each feature column (-1: no sensor reads it, always hidden)."""
    n_columns = problem.splits["train"].X.shape[1]
    owner = np.full(n_columns, -1, dtype=np.int64)
    for s, spec in enumerate(problem.sensors):
        owner[list(spec.features)] = s
    return owner


def hide(problem: DagProblem, X: Any, keep: BoolArray) -> FloatArray:
    """``X`` as float64 with the columns of every sensor not kept set to NaN.

    ``keep`` is [n_sensors] (the same sensors for every row) or [N, n_sensors].
    """
    owner = column_sensor(problem)
    out = np.array(X, dtype=np.float64)
    keep2 = np.broadcast_to(keep, (len(out), problem.n_sensors))
    visible = np.zeros(out.shape, dtype=bool)
    has = owner >= 0
    visible[:, has] = keep2[:, owner[has]]
    out[~visible] = np.nan
    return out


def sample_masks(problem: DagProblem, n_rows: int, rng: np.random.Generator,
                 mask_sets: Sequence[SensorSet] | None = None, lattice_share: float = 0.5
                 ) -> BoolArray:
    """[n_rows, n_sensors] kept sensors: one of ``mask_sets`` (the lattice's node sets) for a
    ``lattice_share`` of the rows, otherwise a uniformly random non-empty subset of a
    uniformly random size."""
    m = problem.n_sensors
    keep = np.zeros((n_rows, m), dtype=bool)
    sizes = rng.integers(1, m + 1, size=n_rows)
    order = np.argsort(rng.random((n_rows, m)), axis=1)
    keep[np.arange(n_rows)[:, None], order] = np.arange(m)[None, :] < sizes[:, None]
    sets = [s for s in (mask_sets or ()) if s]
    if sets:
        from_lattice = np.flatnonzero(rng.random(n_rows) < lattice_share)
        picks = rng.integers(0, len(sets), size=len(from_lattice))
        table = np.zeros((len(sets), m), dtype=bool)
        for i, s in enumerate(sets):
            table[i, list(s)] = True
        keep[from_lattice] = table[picks]
    return keep


def masked_training_set(problem: DagProblem, X: Any, y: IntArray, *, replicas: int,
                        rng: np.random.Generator, mask_sets: Sequence[SensorSet] | None = None,
                        lattice_share: float = 0.5) -> tuple[FloatArray, IntArray]:
    """Every row once with all sensors, then ``replicas - 1`` times with random sensors hidden."""
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    parts = [np.asarray(X, dtype=np.float64)]
    for _ in range(replicas - 1):
        keep = sample_masks(problem, len(X), rng, mask_sets, lattice_share)
        parts.append(hide(problem, X, keep))
    return np.vstack(parts), np.tile(np.asarray(y, dtype=np.int64), replicas)


def _collapse(nodes: Any, column_index: IntArray) -> Any:
    """A predictor's node array with splits on hidden columns (``column_index`` -1) replaced by
    the branch NaN takes, and kept columns renumbered by ``column_index``."""
    leaf = nodes["is_leaf"].astype(bool).tolist()
    feature = nodes["feature_idx"].tolist()
    left, right = nodes["left"].tolist(), nodes["right"].tolist()
    nan_left = nodes["missing_go_to_left"].astype(bool).tolist()
    kept = [bool(leaf[i]) or column_index[feature[i]] >= 0 for i in range(len(leaf))]
    order: list[int] = []
    new_left: list[int] = []
    new_right: list[int] = []

    def visit(i: int) -> int:
        while not kept[i]:
            i = left[i] if nan_left[i] else right[i]
        here = len(order)
        order.append(i)
        new_left.append(0)
        new_right.append(0)
        if not leaf[i]:
            new_left[here] = visit(left[i])
            new_right[here] = visit(right[i])
        return here

    visit(0)
    out = nodes[order].copy()
    out["left"], out["right"] = new_left, new_right
    inner = ~out["is_leaf"].astype(bool)
    out["feature_idx"][inner] = column_index[out["feature_idx"][inner]]
    return out


def specialise(model: HistGradientBoostingClassifier, columns: Sequence[int]
               ) -> HistGradientBoostingClassifier:
    """A copy of a fitted numeric HistGradientBoostingClassifier taking only ``columns`` (in
    that order): it predicts on ``X[:, columns]`` exactly as ``model`` does on ``X`` with
    every other column NaN."""
    from sklearn.ensemble._hist_gradient_boosting.predictor import TreePredictor

    if getattr(model, "is_categorical_", None) is not None:
        raise ValueError("specialise needs a model without categorical features")
    column_index = np.full(model.n_features_in_, -1, dtype=np.int64)
    column_index[list(columns)] = np.arange(len(columns))
    out = copy.copy(model)
    out._predictors = [
        [TreePredictor(_collapse(p.nodes, column_index), p.binned_left_cat_bitsets,
                       p.raw_left_cat_bitsets) for p in iteration]
        for iteration in model._predictors]
    mapper = copy.copy(model._bin_mapper)
    mapper.is_categorical_ = np.zeros(len(columns), dtype=np.uint8)
    mapper.bin_thresholds_ = [model._bin_mapper.bin_thresholds_[c] for c in columns]
    out._bin_mapper = mapper
    out.n_features_in_ = len(columns)
    return out


class MaskedBank(ClassifierBank):
    """Bank entries cut from one masked model (see the module docstring)."""

    def __init__(self, problem: DagProblem, *, max_iter: int = 120, n_folds: int = 3,
                 seed: int = 0, replicas: int = 4,
                 mask_sets: Sequence[SensorSet] | None = None, lattice_share: float = 0.5
                 ) -> None:
        super().__init__(problem, max_iter=max_iter, n_folds=n_folds, seed=seed)
        self.kind = MASKED_KIND
        self.replicas = replicas
        self.mask_sets = [tuple(sorted(s)) for s in mask_sets or ()]
        self.lattice_share = lattice_share
        self._model: HistGradientBoostingClassifier | None = None
        self._folds: list[tuple[IntArray, IntArray, HistGradientBoostingClassifier]] | None = None

    def _spec(self) -> ModelSpec:
        return ModelSpec(MASKED_KIND, self.max_iter, self.seed, False)

    def prefetch(self, sets: Sequence[SensorSet], n_jobs: int, *, out_of_fold: bool = True
                 ) -> None:
        """Nothing ahead of time: every entry is cut from the one masked model (and its fold
        models), fitted on first use (``ChoiceBank.prefetch`` fits them in its pools)."""

    def _masked_job(self, rows: IntArray, salt: int) -> FitJob:
        """The fit of a masked model on masked replicas of the training ``rows``."""
        train = self.problem.splits["train"]
        rng = np.random.default_rng([self.seed, salt])
        X, y = masked_training_set(self.problem, train.X[rows], train.y[rows],
                                   replicas=self.replicas, rng=rng, mask_sets=self.mask_sets,
                                   lattice_share=self.lattice_share)
        return self._spec(), X, y, tuple(range(X.shape[1])), None

    def _fit_masked(self, rows: IntArray, salt: int) -> HistGradientBoostingClassifier:
        _, X, y, _, _ = self._masked_job(rows, salt)
        model: HistGradientBoostingClassifier = self._fit_one(X, y)
        return model

    def _folds_split(self) -> list[tuple[IntArray, IntArray]]:
        rows = np.arange(len(self.problem.splits["train"].y))
        return list(KFold(self.n_folds, shuffle=True, random_state=self.seed).split(rows))

    def model_jobs(self) -> list[FitJob]:
        """The fit of the masked model on the whole training split, if not fitted yet."""
        if self._model is not None:
            return []
        return [self._masked_job(np.arange(len(self.problem.splits["train"].y)), 0)]

    def fold_jobs(self) -> list[FitJob]:
        """The fits of the fold models (``fold_models``), if not fitted yet."""
        if self._folds is not None:
            return []
        return [self._masked_job(fit, 1 + k) for k, (fit, _) in enumerate(self._folds_split())]

    def store(self, models: Sequence[Any], *, folds: bool) -> None:
        """Keep models fitted elsewhere from ``model_jobs`` or (``folds``) ``fold_jobs``."""
        if not models:
            return
        self._fits += len(models)
        if folds:
            self._folds = [(fit, held, model) for (fit, held), model
                           in zip(self._folds_split(), models, strict=True)]
        else:
            (self._model,) = models

    @property
    def model(self) -> HistGradientBoostingClassifier:
        """The masked model fitted on the whole training split (fitted on first use)."""
        if self._model is None:
            self._model = self._fit_masked(np.arange(len(self.problem.splits["train"].y)), 0)
        return self._model

    @property
    def fold_models(self) -> list[tuple[IntArray, IntArray, HistGradientBoostingClassifier]]:
        """``(fit_rows, held_rows, model)`` per fold; each model saw only its ``fit_rows``."""
        if self._folds is None:
            self._folds = [(fit, held, self._fit_masked(fit, 1 + k))
                           for k, (fit, held) in enumerate(self._folds_split())]
        return self._folds

    def _fit(self, sensors: SensorSet) -> BankEntry:
        columns = self.problem.columns(sensors)
        if not columns:
            return super()._fit(sensors)
        return BankEntry(sensors, columns, specialise(self.model, columns))

    def _out_of_fold(self, entry: BankEntry) -> FloatArray:
        train = self.problem.splits["train"]
        keep = np.zeros(self.problem.n_sensors, dtype=bool)
        keep[list(entry.sensors)] = True
        oof = np.zeros((len(train.y), self.problem.n_classes))
        for _, held, model in self.fold_models:
            oof[held] = self._predict(model, hide(self.problem, train.X[held], keep))
        return oof


def log_loss(proba: FloatArray, y: IntArray) -> float:
    """Mean negative log-likelihood, probabilities clipped at 1e-6 (``gating.hpc_loss``)."""
    return float(hpc_loss(proba, y).mean())


class ChoiceBank(ClassifierBank):
    """Per sensor set, the per-subset or the masked entry: the lower validation log-loss."""

    def __init__(self, per_subset: ClassifierBank, masked: MaskedBank) -> None:
        super().__init__(per_subset.problem, kind=per_subset.model_kind,
                         max_iter=per_subset.max_iter, n_folds=per_subset.n_folds,
                         seed=per_subset.seed, early_stopping=per_subset.early_stopping)
        self.kind = f"per-node({per_subset.kind}|{MASKED_KIND})"
        self.banks: dict[str, ClassifierBank] = {"per-subset": per_subset, MASKED_KIND: masked}
        self.choices: dict[SensorSet, str] = {}
        self.val_log_loss: dict[SensorSet, dict[str, float]] = {}

    def __len__(self) -> int:
        return len(self.choices)

    @property
    def fits(self) -> int:
        return sum(b.fits for b in self.banks.values())

    def choice(self, sensors: SensorSet) -> str:
        """``"per-subset"`` or ``"masked"``: the bank answering for ``sensors``."""
        key = tuple(sorted(sensors))
        if key not in self.choices:
            y = self.problem.splits["val"].y
            losses = {name: log_loss(bank.proba(key, "val"), y)
                      for name, bank in self.banks.items()}
            self.val_log_loss[key] = losses
            self.choices[key] = (MASKED_KIND if losses[MASKED_KIND] < losses["per-subset"]
                                 else "per-subset")
        return self.choices[key]

    def get(self, sensors: SensorSet) -> BankEntry:
        return self.banks[self.choice(sensors)].get(tuple(sorted(sensors)))

    def prefetch(self, sets: Sequence[SensorSet], n_jobs: int, *, out_of_fold: bool = True
                 ) -> None:
        """The per-subset models of ``sets`` and the masked model (their validation losses
        decide each choice) in one pool of ``n_jobs`` processes, then, with ``out_of_fold``,
        the fold models of the sets that choose per-subset models and, if a set chooses the
        masked model, its fold models in a second (``ClassifierBank.prefetch``)."""
        per_subset, masked = self.banks["per-subset"], self.banks[MASKED_KIND]
        assert isinstance(masked, MaskedBank)
        keys = list(dict.fromkeys(tuple(sorted(s)) for s in sets))
        masked.store(prefetch_models([per_subset], keys, n_jobs, masked.model_jobs()),
                     folds=False)
        for key in keys:
            per_subset.proba(key, "val")
        if not out_of_fold:
            return
        chosen = [per_subset.get(k) for k in keys if self.choice(k) == "per-subset"]
        wants_masked = any(self.choice(k) == MASKED_KIND and self.problem.columns(k)
                           for k in keys)
        extra = masked.fold_jobs() if wants_masked else []
        masked.store(per_subset._prefetch_out_of_fold(chosen, n_jobs, extra), folds=True)

    def proba(self, sensors: SensorSet, split: str) -> FloatArray:
        return self.banks[self.choice(sensors)].proba(tuple(sorted(sensors)), split)

    def counts(self, sets: Sequence[SensorSet] | None = None) -> dict[str, int]:
        """How many of ``sets`` (default: every set decided so far) use each bank."""
        keys = self.choices if sets is None else [tuple(sorted(s)) for s in sets]
        out = dict.fromkeys(self.banks, 0)
        for key in keys:
            out[self.choice(key)] += 1
        return out

    def summary(self) -> dict[str, object]:
        return {"kind": self.kind, "entries": len(self), "fits": self.fits,
                "per_subset": self.banks["per-subset"].summary(), "nodes": self.counts()}
