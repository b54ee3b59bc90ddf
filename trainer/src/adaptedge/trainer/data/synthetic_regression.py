"""The synthetic experiment of Xu et al. (JMLR 2014, §6.1) as the paper builds it: a regression.

``x, z`` uniform on [-1, 1]. Cheap sensors ``sign_x``, ``sign_z`` (cost 1 each) tell the
quadrant; expensive sensors ``e_pp``, ``e_pm``, ``e_mp``, ``e_mm`` (cost 10 each; ``pm``: x > 0,
z < 0) equal the label exactly on rows of their own quadrant and are noise (standard normal)
elsewhere. Labels are Gaussian with variance 1 around a quadrant mean, the two negative-z
means above the two positive-z ones (the paper's Figure 5; the paper gives no numbers):
``pp`` 1, ``mp`` -1, ``pm`` 3, ``mm`` 5. The x-effect flips sign between the halves, so
``sign_x`` alone says nothing about the label: the tree must split on ``sign_z`` first. A
perfect regressor reads both signs and its quadrant's expensive sensor: MSE 0 at cost 12.
"""

from __future__ import annotations

import numpy as np

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.data.dataset_core import Dataset, as_regression
from adaptedge.trainer.data.synthetic_quadrants import (
    CHEAP_COST,
    EXPENSIVE_COST,
    FEATURES,
    QUADRANTS,
    quadrant_of,
)

MEANS = {"pp": 1.0, "mp": -1.0, "pm": 3.0, "mm": 5.0}
"""Label mean per quadrant: negative z (``pm``, ``mm``) above positive z (``pp``, ``mp``)."""


def regression_quadrants(n: int = 4000, seed: int = 0, outside: float = 1.0) -> Dataset:
    """``n`` points split 60/20/20 into train/validation/test in draw order (seeded);
    ``outside`` is the standard deviation of an expensive feature off its quadrant."""
    rng = np.random.default_rng(seed)
    x, z = rng.uniform(-1, 1, size=(2, n))
    quadrant = quadrant_of(x, z)
    y = np.array([MEANS[q] for q in QUADRANTS])[quadrant] + rng.normal(0.0, 1.0, size=n)
    expensive = rng.normal(0.0, outside, size=(n, 4))
    expensive[np.arange(n), quadrant] = y
    X = np.column_stack([np.sign(x), np.sign(z), expensive]).astype(np.float32)
    y = X[np.arange(n), 2 + quadrant].astype(np.float64)  # the label IS the float32 feature
    sensors = tuple(SensorSpec(name, (i,), energy_mj=CHEAP_COST if i < 2 else EXPENSIVE_COST)
                    for i, name in enumerate(FEATURES))
    a, b = int(0.6 * n), int(0.8 * n)
    splits = [np.arange(0, a), np.arange(a, b), np.arange(b, n)]
    no_class = np.zeros(n, dtype=np.int64)
    base = Dataset(
        name="synthetic-regression", X_train=X[:a], y_train=no_class[:a], X_val=X[a:b],
        y_val=no_class[a:b], X_test=X[b:], y_test=no_class[b:], classes=(),
        feature_names=FEATURES, sensors=sensors, cost_weights=CostWeights(energy_mj=1.0),
        link=LinkSpec(),
        description="Xu et al. (JMLR 2014) §6.1: two cheap quadrant signs (cost 1), four "
                    "expensive per-quadrant label features (cost 10), Gaussian labels around "
                    "quadrant means; a perfect regressor costs exactly 12.")
    return as_regression(base, y, splits, "y", "")
