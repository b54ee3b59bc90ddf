"""Binary quadrant sets with decoys and unequal costs (issue 32): data CSTC was not tuned on.

Points fall in the four quadrants of the (x, z) plane (``pp``: x > 0, z > 0; ``pm``: x > 0,
z < 0; ...) with a share per quadrant. Sensors:

- two cheap *locators*, ``sign_x`` and ``sign_z``, that tell the quadrant;
- one *expert* per quadrant, ``e_pp`` ... ``e_mm``, each at its own cost: on its own quadrant's
  rows it shows the label (as -1/+1, plus Gaussian noise of 0.05), elsewhere standard normal
  noise;
- *decoys*: ``hint`` (cheap: the label flipped on ``hint_flip`` of the rows), ``global``
  (dearer than any expert: the label flipped on ``global_flip`` of the rows, in every
  quadrant), ``proxy`` (cheaper than ``sign_x``: ``sign_x`` flipped on ``proxy_flip`` of the
  rows, a tempting but wrong locator) and two pure-noise sensors ``noise_a``, ``noise_b``.

Each quadrant has its own positive rate, so the locators carry some label information (the
CSTC assumption: similar labels, similar features) but no decoy and no locator reaches 98%.
The *perfect tree* reads both locators and its row's quadrant's expert: accuracy 1 (up to the
experts' noise, below 1e-20) at cost ``perfect_cost`` = both locators + the share-weighted
mean expert cost. No cheaper policy reaches 98%: without its quadrant's expert a row is
right with probability at most ``max(rate, 1 - rate)`` or ``1 - global_flip``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.data.dataset_core import Dataset

QUADRANTS = ("pp", "pm", "mp", "mm")
NOISE = 0.05


@dataclass(frozen=True)
class Variant:
    """One quadrant set: per-quadrant share, positive rate and expert cost, and the costs of
    the locators and decoys."""

    name: str
    share: dict[str, float]
    rate: dict[str, float]
    expert_cost: dict[str, float]
    sign_cost: tuple[float, float]
    """Costs of ``sign_x`` and ``sign_z``."""
    hint_cost: float
    hint_flip: float
    global_cost: float
    global_flip: float
    proxy_cost: float
    proxy_flip: float
    noise_cost: float

    def perfect_cost(self) -> float:
        """Mean cost of the perfect tree: both locators and the row's quadrant's expert."""
        return sum(self.sign_cost) + sum(self.share[q] * self.expert_cost[q] for q in QUADRANTS)

    def sensor_costs(self) -> tuple[tuple[str, float], ...]:
        return (("sign_x", self.sign_cost[0]), ("sign_z", self.sign_cost[1]),
                *((f"e_{q}", self.expert_cost[q]) for q in QUADRANTS),
                ("hint", self.hint_cost), ("global", self.global_cost),
                ("proxy", self.proxy_cost), ("noise_a", self.noise_cost),
                ("noise_b", self.noise_cost))


VARIANTS = {
    "even": Variant(
        "even", share={q: 0.25 for q in QUADRANTS},
        rate={"pp": 0.85, "pm": 0.35, "mp": 0.65, "mm": 0.15},
        expert_cost={"pp": 4.0, "pm": 5.0, "mp": 6.0, "mm": 9.0}, sign_cost=(1.0, 2.0),
        hint_cost=1.0, hint_flip=0.35, global_cost=15.0, global_flip=0.08,
        proxy_cost=0.5, proxy_flip=0.15, noise_cost=0.5),
    "skewed": Variant(
        "skewed", share={"pp": 0.4, "pm": 0.3, "mp": 0.2, "mm": 0.1},
        rate={"pp": 0.75, "pm": 0.9, "mp": 0.2, "mm": 0.35},
        expert_cost={"pp": 3.0, "pm": 6.0, "mp": 10.0, "mm": 14.0}, sign_cost=(2.0, 1.0),
        hint_cost=1.5, hint_flip=0.3, global_cost=12.0, global_flip=0.1,
        proxy_cost=0.5, proxy_flip=0.15, noise_cost=1.0),
}
"""``even``: equal shares, perfect tree 9.0; ``skewed``: unequal shares, the commonest
quadrant's expert cheapest, perfect tree 9.4."""


def _flip(rng: np.random.Generator, sign: np.ndarray, rate: float) -> np.ndarray:
    return np.where(rng.random(len(sign)) < rate, -sign, sign)


def decoy_quadrants(variant: str = "even", n: int = 4000, seed: int = 0) -> Dataset:
    """``n`` rows of ``VARIANTS[variant]``, split 60/20/20 into train/validation/test in draw
    order (seeded)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown quadrant variant {variant!r}; known: {', '.join(VARIANTS)}")
    v = VARIANTS[variant]
    rng = np.random.default_rng(seed)
    quadrant = rng.choice(4, size=n, p=[v.share[q] for q in QUADRANTS])
    sx = np.where(quadrant < 2, 1.0, -1.0)
    sz = np.where(quadrant % 2 == 0, 1.0, -1.0)
    rate = np.array([v.rate[q] for q in QUADRANTS])[quadrant]
    y = (rng.random(n) < rate).astype(np.int64)
    shown = 2.0 * y - 1.0
    experts = rng.normal(0.0, 1.0, size=(n, 4))
    experts[np.arange(n), quadrant] = shown + rng.normal(0.0, NOISE, size=n)
    X = np.column_stack([sx, sz, experts, _flip(rng, shown, v.hint_flip),
                         _flip(rng, shown, v.global_flip), _flip(rng, sx, v.proxy_flip),
                         rng.normal(0.0, 1.0, size=(n, 2))]).astype(np.float32)
    names = tuple(name for name, _ in v.sensor_costs())
    sensors = tuple(SensorSpec(name, (i,), energy_mj=cost)
                    for i, (name, cost) in enumerate(v.sensor_costs()))
    a, b = int(0.6 * n), int(0.8 * n)
    return Dataset(
        name=f"quadrants-{variant}",
        X_train=X[:a], y_train=y[:a], X_val=X[a:b], y_val=y[a:b], X_test=X[b:], y_test=y[b:],
        classes=("0", "1"), feature_names=names, sensors=sensors,
        cost_weights=CostWeights(energy_mj=1.0), link=LinkSpec(),
        description=f"binary quadrants with decoys ({variant}): two locators, one expert per "
                    f"quadrant at unequal costs, decoys; the perfect tree costs "
                    f"{v.perfect_cost():g}.")
