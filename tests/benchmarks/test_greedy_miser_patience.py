"""``benchmarks.greedy_miser_patience``: its stop rule, read off a full fit's validation curve,
is the one a fit under ``ValidationPatience`` follows."""

from __future__ import annotations

import pytest

from adaptedge.trainer.methods.greedy_miser import GreedyMiser, ValidationPatience
from benchmarks.greedy_miser_patience import stopped_at
from tests.trainer.methods.test_greedy_miser import noisy_rows, small_miser


@pytest.mark.slow
def test_stopped_at_reads_a_curve_as_validation_patience_fits() -> None:
    X, y = noisy_rows(3, 500)
    Xv, yv = noisy_rows(4, 500)

    def model() -> GreedyMiser:
        return small_miser(n_rounds=12, n_trees=20, max_depth=4)

    curve = model().fit(X, y).staged_accuracy(Xv, yv).tolist()
    for patience in (20, 50, 90, 1000):
        trees, best = stopped_at(curve, patience)
        fit = model().fit(X, y, stop=ValidationPatience(Xv, yv, patience))
        assert len(fit.f1_trees_) == trees, patience
        assert fit.at_best_iteration(Xv, yv).best_iteration_ == best, patience
    assert stopped_at(curve, 20)[0] < len(curve) == 240  # the rule did stop a fit early
    assert stopped_at([0.5, 0.6, 0.6, 0.6], 2, round_trees=1) == (4, 2)
    assert stopped_at([0.5, 0.6], 5, round_trees=1) == (2, 2)
