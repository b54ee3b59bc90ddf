"""The CSTC node objective's analytic gradient against central differences (shared by the
CSTC tests of each loss)."""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptedge.trainer.methods.cstc.node_solve import node_objective, node_terms
from adaptedge.trainer.methods.cstc.objective import forward, solve_aux


def assert_node_gradient(prob: Any, shape: Any, P: Any, k: int) -> None:
    """Node ``k``'s objective gradient equals its central difference (step 1e-6)."""
    st = forward(prob, shape, P)
    aux = solve_aux(prob, shape, P, st)
    fun, x0, _, _ = node_objective(prob, shape, P, aux, k, node_terms(prob, shape, P, st, aux, k))
    _, grad = fun(x0)
    numeric = np.array([(fun(x0 + 1e-6 * e)[0] - fun(x0 - 1e-6 * e)[0]) / 2e-6
                        for e in np.eye(len(x0))])
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-6)
