"""CSTC's softmax loss (issue 35): ``log_softmax_and_softmax`` gives scipy's two functions'
values bit for bit from one pass, so fits and bundles do not change."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax, softmax

from adaptedge.trainer.methods.cstc.objective import log_softmax_and_softmax, logistic


@pytest.mark.parametrize("seed", range(5))
def test_the_pair_equals_scipys_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scale = [1e-3, 1.0, 30.0, 700.0, 1e5][seed]  # tiny to saturating logits
    z = rng.normal(scale=scale, size=(257, 2 + seed * 6))
    z[::17] = z[::17, :1]  # rows of equal logits
    log_p, p = log_softmax_and_softmax(z)
    assert np.array_equal(log_p, log_softmax(z, axis=1))
    assert np.array_equal(p, softmax(z, axis=1))


def test_a_row_without_a_finite_maximum_is_left_to_scipy() -> None:
    z = np.array([[0.0, 1.0, 2.0], [np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf]])
    with np.errstate(invalid="ignore"):
        log_p, p = log_softmax_and_softmax(z)
        want_log, want_p = log_softmax(z, axis=1), softmax(z, axis=1)
    assert np.array_equal(log_p, want_log, equal_nan=True)
    assert np.array_equal(p, want_p, equal_nan=True)


def test_the_loss_and_gradient_are_the_softmax_cross_entropys() -> None:
    rng = np.random.default_rng(7)
    z = rng.normal(size=(50, 4))
    Y = np.eye(4)[rng.integers(0, 4, 50)]
    loss, grad = logistic(z, Y)
    assert np.allclose(loss, -np.log((softmax(z, axis=1) * Y).sum(axis=1)))
    assert np.array_equal(grad, softmax(z, axis=1) - Y)
