"""The classifier bank's prefetch fits on worker processes what first use would fit here: the same
models, probabilities and fit count, per-subset and per-node choice banks alike."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from adaptedge.trainer.methods.dag.bank import ClassifierBank
from adaptedge.trainer.methods.dag.masked import ChoiceBank, MaskedBank
from adaptedge.trainer.methods.dag.sweep import DagSettings, choose_per_subset
from tests.trainer.methods.test_dag import synthetic

pytestmark = pytest.mark.usefixtures("one_native_thread")

SETS = [(0,), (3,), (0, 3), (1, 2), (2, 1), ()]


def _trees(model: Any) -> list[bytes]:
    return [p.nodes.tobytes() for per_class in model._predictors for p in per_class]


def _same_entries(lazy: ClassifierBank, ahead: ClassifierBank) -> None:
    for sensors in SETS:
        for split in ("val", "train"):
            np.testing.assert_array_equal(ahead.proba(sensors, split), lazy.proba(sensors, split))
        X = lazy.problem.splits["test"].X[:, list(lazy.get(sensors).columns)]
        np.testing.assert_array_equal(ahead.predict(sensors, X), lazy.predict(sensors, X))


@pytest.mark.slow
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_prefetch_fits_what_first_use_fits(n_jobs: int) -> None:
    problem = synthetic(1, n=300)
    lazy = ClassifierBank(problem, kind="hgb", max_iter=15, n_folds=2, early_stopping=True)
    ahead = ClassifierBank(problem, kind="hgb", max_iter=15, n_folds=2, early_stopping=True)
    ahead.prefetch(SETS, n_jobs)
    fitted = ahead.fits
    assert fitted == 4 * 3  # four distinct non-empty sets: one model and two folds each
    _same_entries(lazy, ahead)
    assert ahead.fits == fitted == lazy.fits  # nothing left to fit on use
    for sensors in SETS[:4]:  # the same trees, split for split
        assert _trees(ahead.get(sensors).model) == _trees(lazy.get(sensors).model)


@pytest.mark.slow
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_choice_bank_prefetch_fits_only_the_chosen_fold_models(n_jobs: int) -> None:
    problem = synthetic(2)  # sensor 0 non-linear: the masked trees win where it is read
    rng = np.random.default_rng(0)  # (tests.trainer.methods.test_dag_masked)
    for split in problem.splits.values():
        split.X[:, 0] *= rng.choice([-1.0, 1.0], size=len(split.X))

    def bank() -> ChoiceBank:
        return ChoiceBank(ClassifierBank(problem, kind="lr", n_folds=2),
                          MaskedBank(problem, max_iter=25, n_folds=2, replicas=1))

    lazy, ahead = bank(), bank()
    ahead.prefetch(SETS, n_jobs)
    fitted = ahead.fits
    chosen = {s: ahead.choice(s) for s in SETS}
    _same_entries(lazy, ahead)
    assert chosen == {s: lazy.choice(s) for s in SETS}
    assert ahead.fits == lazy.fits
    assert fitted == ahead.fits  # the masked model and its fold models came with the pools
    masked = ahead.banks["masked"]
    assert isinstance(masked, MaskedBank) and masked.model_jobs() == masked.fold_jobs() == []
    assert set(chosen.values()) == {"masked", "per-subset"}, chosen


def test_kinds_fitted_side_by_side_choose_as_one_by_one() -> None:
    problem = synthetic(3, n=300)
    settings = DagSettings.quick(classifier="per-subset")
    one, two = choose_per_subset(problem, settings, 1), choose_per_subset(problem, settings, 2)
    assert one.kind == two.kind and one.kind_scores == two.kind_scores
    assert len(one.kind_scores) == 3 and one.fits == two.fits == 1
    everything = problem.all_sensors
    np.testing.assert_array_equal(one.proba(everything, "val"), two.proba(everything, "val"))
