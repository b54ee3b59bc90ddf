"""Which nodes of a CSTC tree each row visits under hard routing (used by the optimiser and by
the look-ahead initialisation)."""

from __future__ import annotations

import numpy as np

from adaptedge.trainer.methods.cstc.objective import FloatArray, Params
from adaptedge.trainer.methods.cstc.structure import Shape


def visiting(shape: Shape, P: Params, X: FloatArray, Z: list[FloatArray] | None = None
             ) -> list[FloatArray]:
    """Hard 0/1 visit indicator of every node for rows ``X`` (standardised); ``Z``: the
    nodes' logits on ``X`` if already known."""
    visit = [np.zeros(len(X)) for _ in range(shape.n_nodes)]
    visit[0][:] = 1
    for k in shape.alive():
        if shape.routes(k):
            z = X @ P.W[k] + P.b[k] if Z is None else Z[k]
            up = (z @ P.v[k] - P.theta[k] >= 0).astype(float)
            visit[shape.hi[k]] = visit[k] * up
            if shape.lo[k] >= 0:
                visit[shape.lo[k]] = visit[k] * (1 - up)
    return visit
