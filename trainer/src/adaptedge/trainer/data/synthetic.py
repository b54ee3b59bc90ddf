"""The paper's synthetic 2-D problems as seeded ``Dataset``s (Nan & Saligrama, NIPS 2017, §5).

- ``synthetic_1``: a binary problem whose centre is ambiguous (an XOR-like core inside a
  linearly separable ring); the HPC (an RBF-SVM in the paper) is needed only in the centre.
  Feature costs are uniform but irrelevant there: the plot is accuracy vs escalation rate.
- ``synthetic_2``: four equal clusters, two unit-cost sensors (x1, x2). Clusters 1 and 2 share
  the lower x2 band and differ in x1; cluster 2 is two halves with opposite labels that only
  a model on both features separates (the HPC's job: no linear LPC fits all clusters);
  clusters 3 and 4 sit higher and differ in x2 only.
  x1 is the stronger single feature overall, so L1 selection picks it: the best such system
  answers cluster 1 locally and escalates the rest (cost 1 + 0.75 = 1.75 at full accuracy).
  Reading x2 only, a gate sends clusters 1-2 to the HPC and the LPC separates 3 from 4:
  full accuracy at cost 1 + 0.5 = 1.5. The paper's text gives clusters 1 and 2 "more data
  points"; the shares here are equal because its costs (1.75 and 1.5) are those of equal
  clusters, and x1 is already L1's first pick with them (``tests/test_baselines.py``).
  ADAPT-LIN reaches the x2-only system from its per-sensor warm starts (``trainer.methods.adapt_lin``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.data.datasets import Dataset

UNIFORM = CostWeights(energy_mj=0.0, uniform=1.0)
CLUSTERS_2 = (  # (x1, x2, label, share); cluster 2 is two halves with opposite labels
    (-5.0, -0.5, 1, 0.25),
    (1.0, -0.5, 0, 0.125),
    (1.0, 0.5, 1, 0.125),
    (0.0, 2.0, 0, 0.25),
    (0.0, 4.0, 1, 0.25),
)


def _split(X: NDArray[np.float64], y: NDArray[np.int64], name: str, description: str
           ) -> Dataset:
    n = len(y)
    a, b = int(0.6 * n), int(0.8 * n)
    sensors = (SensorSpec("x1", (0,)), SensorSpec("x2", (1,)))
    return Dataset(
        name=name,
        X_train=X[:a].astype(np.float32), y_train=y[:a],
        X_val=X[a:b].astype(np.float32), y_val=y[a:b],
        X_test=X[b:].astype(np.float32), y_test=y[b:],
        classes=("0", "1"), feature_names=("x1", "x2"), sensors=sensors,
        cost_weights=UNIFORM, link=LinkSpec(), description=description,
    )


def synthetic_2(n: int = 2000, seed: int = 0, spread: float = 0.12) -> Dataset:
    """Four equal Gaussian clusters (see the module docstring); rows shuffled with ``seed``."""
    rng = np.random.default_rng(seed)
    sizes = [round(n * share) for *_, share in CLUSTERS_2]
    X = np.vstack([rng.normal((cx, cy), spread, size=(m, 2))
                   for (cx, cy, _, _), m in zip(CLUSTERS_2, sizes, strict=True)])
    y = np.concatenate([np.full(m, label, dtype=np.int64)
                        for (_, _, label, _), m in zip(CLUSTERS_2, sizes, strict=True)])
    order = rng.permutation(len(y))
    return _split(X[order], y[order], "synthetic-2",
                  "Nan & Saligrama Synthetic-2: four clusters, two unit-cost features")


def synthetic_1(n: int = 3000, seed: int = 0) -> Dataset:
    """Uniform points in [-3, 3]²: label = x1 + x2 > 0 outside radius 1.2, XOR inside."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    centre = np.hypot(X[:, 0], X[:, 1]) < 1.2
    y = np.where(centre, (X[:, 0] * X[:, 1] > 0), (X[:, 0] + X[:, 1] > 0)).astype(np.int64)
    return _split(X, y, "synthetic-1",
                  "Nan & Saligrama Synthetic-1: linear far field, XOR-like ambiguous centre")
