"""``benchmarks.l1_convergence``: the reference solver reaches the L1 optimum that a tightly
converged saga reaches, binary and multinomial, on small data."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from adaptedge.trainer.methods.baselines import l1_penalty
from benchmarks.l1_convergence import objective, split_lbfgsb


@pytest.mark.parametrize("n_classes", [2, 3])
def test_split_lbfgsb_reaches_a_converged_sagas_objective_and_support(n_classes: int) -> None:
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(300, 6))
    logits = Z[:, :2] @ rng.normal(size=(2, n_classes)) * 2
    y = np.array([rng.choice(n_classes, p=np.exp(r) / np.exp(r).sum()) for r in logits])
    C = 0.05
    saga = LogisticRegression(**l1_penalty(), solver="saga", C=C, tol=1e-10, max_iter=100_000,
                              random_state=0).fit(Z, y)
    k = 1 if n_classes == 2 else n_classes
    W, b = split_lbfgsb(Z, y, C, np.zeros((6, k)), np.zeros(k))
    saga_objective = objective(Z, y, saga.coef_.T, saga.intercept_, C)
    assert objective(Z, y, W, b, C) == pytest.approx(saga_objective, rel=1e-6)
    assert objective(Z, y, W, b, C) <= saga_objective + 1e-6
    assert np.array_equal(np.abs(W).sum(axis=1) > 1e-6,
                          np.abs(saga.coef_.T).sum(axis=1) > 1e-6)  # the same features
    assert (np.abs(W).sum(axis=1) == 0).any()  # L1 zeroes some: exact zeros at the bound
