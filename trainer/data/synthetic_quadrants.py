"""The synthetic experiment of Xu et al. (JMLR 2014, §6.1) in a classification form.

Points are uniform in the four quadrants of the (x, z) plane, ``x, z`` in [-1, 1]. Sensors:
``sign_x`` and ``sign_z`` (cost 1 each) tell the quadrant; ``e_pp``, ``e_pm``, ``e_mp`` and
``e_mm`` (cost 10 each) hold the label exactly (as -1/+1) for points of their own quadrant
(``pp``: x > 0, z > 0; ``pm``: x > 0, z < 0; ...) and Gaussian noise elsewhere. The paper's
regression labels become a binary label whose rate depends on the quadrant (0.85, 0.65,
0.35, 0.15 for ``pp``, ``mp``, ``pm``, ``mm``): labels of nearby quadrants are alike, the
paper's CSTC assumption, so a classifier on the cheap sensors routes a point towards the
quadrant that can answer it, but no classifier on cheap sensors alone answers well. A perfect
classifier reads ``sign_x``, ``sign_z`` and its quadrant's expensive sensor: cost exactly 12.
"""

from __future__ import annotations

import numpy as np

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.data.dataset_core import Dataset

QUADRANTS = ("pp", "pm", "mp", "mm")
POSITIVE_RATE = {"pp": 0.85, "mp": 0.65, "pm": 0.35, "mm": 0.15}
CHEAP_COST, EXPENSIVE_COST = 1.0, 10.0
FEATURES = ("sign_x", "sign_z", *(f"e_{q}" for q in QUADRANTS))


def quadrant_of(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Index into ``QUADRANTS`` of each point."""
    return np.where(x > 0, 0, 2) + np.where(z > 0, 0, 1)


def synthetic_quadrants(n: int = 4000, seed: int = 0, noise: float = 0.05,
                        outside: float = 1.0,
                        rates: dict[str, float] | None = None) -> Dataset:
    """``n`` points split 60/20/20 into train/validation/test (seeded); ``outside`` is the
    standard deviation of an expensive feature away from its quadrant."""
    rng = np.random.default_rng(seed)
    x, z = rng.uniform(-1, 1, size=(2, n))
    quadrant = quadrant_of(x, z)
    rate = np.array([(rates or POSITIVE_RATE)[q] for q in QUADRANTS])[quadrant]
    y = (rng.random(n) < rate).astype(np.int64)
    expensive = rng.normal(0.0, outside, size=(n, 4))
    own = np.arange(n)
    expensive[own, quadrant] = (2 * y - 1) + rng.normal(0.0, noise, size=n)
    X = np.column_stack([np.sign(x), np.sign(z), expensive]).astype(np.float32)
    sensors = tuple(SensorSpec(name, (i,), energy_mj=CHEAP_COST if i < 2 else EXPENSIVE_COST)
                    for i, name in enumerate(FEATURES))
    a, b = int(0.6 * n), int(0.8 * n)
    return Dataset(
        name="synthetic-quadrants",
        X_train=X[:a], y_train=y[:a], X_val=X[a:b], y_val=y[a:b], X_test=X[b:], y_test=y[b:],
        classes=("0", "1"), feature_names=FEATURES, sensors=sensors,
        cost_weights=CostWeights(energy_mj=1.0), link=LinkSpec(),
        description="Xu et al. (JMLR 2014) §6.1 in classification form: two cheap quadrant "
                    "signs (cost 1), four expensive per-quadrant label features (cost 10); a "
                    "perfect classifier costs exactly 12.")
