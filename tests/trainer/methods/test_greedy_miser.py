"""Greedy Miser at the paper's protocol (issue 20 item 1, issue 32 item 3): up to 3,000 trees of
depth 4 at step size 0.1, and per λ the boosting iteration with the best validation accuracy."""

from __future__ import annotations

import numpy as np

from adaptedge.trainer.export.run import run_node
from adaptedge.trainer.methods.adapt_gbrt_method import DEFAULTS as ADAPT
from adaptedge.trainer.methods.greedy_miser import (
    FULL_STRENGTH,
    PAPER_TREES,
    GreedyMiser,
    ValidationPatience,
)


def test_full_strength_is_the_papers_protocol() -> None:
    assert FULL_STRENGTH["n_rounds"] * FULL_STRENGTH["n_trees"] == PAPER_TREES == 3000
    assert FULL_STRENGTH["max_depth"] == 4 and FULL_STRENGTH["learning_rate"] == 0.1
    assert FULL_STRENGTH["min_samples_leaf"] == ADAPT["min_samples_leaf"]


def small_miser(n_rounds: int = 10, n_trees: int = 10, max_depth: int = 5) -> GreedyMiser:
    """A small fit on ``noisy_rows``: step 0.3, leaves of 5 rows, no feature price."""
    return GreedyMiser(gamma=0.0, n_rounds=n_rounds, n_trees=n_trees, max_depth=max_depth,
                       min_samples_leaf=5, learning_rate=0.3, random_state=0)


def noisy_rows(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8)).astype(np.float32)
    # label noise: late trees fit noise, so the best validation iteration is not the last
    y = ((X[:, 0] + 0.5 * X[:, 1] + rng.normal(scale=1.0, size=n)) > 0).astype(np.int64)
    return X, y


def test_the_iteration_is_chosen_on_validation() -> None:
    X, y = noisy_rows(1, 600)
    Xv, yv = noisy_rows(2, 600)
    full = small_miser().fit(X, y)
    staged = full.staged_accuracy(Xv, yv)
    assert staged.shape == (100,)
    best = full.at_best_iteration(Xv, yv)
    assert best.best_iteration_ == int(np.argmax(staged)) + 1 < 100
    assert len(best.f1_trees_) == best.best_iteration_
    assert float(np.mean(best.predict(Xv) == yv)) == staged.max() > staged[-1]
    assert not (best.sensors_bought_ & ~full.sensors_bought_).any()
    assert len(full.f1_trees_) == 100  # the fitted model is left alone
    # the exported node is the truncated one
    cols = list(best.node_columns())
    out = run_node(best.to_onnx(), Xv[:, cols])["probabilities"]
    assert float(np.mean(out.argmax(axis=1) == yv)) == staged.max()


def test_validation_patience_stops_after_the_best_and_keeps_the_same_trees() -> None:
    X, y = noisy_rows(1, 600)
    Xv, yv = noisy_rows(2, 600)
    full = small_miser().fit(X, y)
    staged = full.staged_accuracy(Xv, yv)
    best_at = int(np.argmax(staged)) + 1
    patience = 25
    stopped = small_miser().fit(X, y, stop=ValidationPatience(Xv, yv, patience))
    # the first round's end at least `patience` trees past the best (rounds of 10 trees)
    assert len(stopped.f1_trees_) == min(100, -(-(best_at + patience) // 10) * 10) < 100
    assert np.array_equal(stopped.staged_accuracy(Xv, yv), staged[:len(stopped.f1_trees_)])
    assert stopped.at_best_iteration(Xv, yv).best_iteration_ == best_at
    never = small_miser().fit(X, y, stop=ValidationPatience(Xv, yv, 1000))
    assert len(never.f1_trees_) == 100


def test_the_stop_rules_accuracies_are_reused_not_redone() -> None:
    """``at_best_iteration(..., stop)`` extends the rule's staged accuracies: the same choice
    as a fresh walk, with no tree walked twice (the rule has walked every tree it saw)."""
    X, y = noisy_rows(1, 600)
    Xv, yv = noisy_rows(2, 600)
    for patience in (25, 1000):  # stopped early; grown to the end
        stop = ValidationPatience(Xv, yv, patience)
        fitted = small_miser().fit(X, y, stop=stop)
        fresh = fitted.at_best_iteration(Xv, yv)
        walked = len(stop.accuracy)
        reused = fitted.at_best_iteration(Xv, yv, stop)
        assert walked == len(stop.accuracy) == len(fitted.f1_trees_)
        assert reused.best_iteration_ == fresh.best_iteration_
        assert np.array_equal(stop.accuracy, fitted.staged_accuracy(Xv, yv))
