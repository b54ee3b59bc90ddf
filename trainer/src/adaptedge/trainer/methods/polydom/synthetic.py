"""The paper's synthetic setting (section 6) as a dataset: features of chosen usefulness and
interaction, random cost polynomials with many crossings, and item sizes.

A latent ``z`` decides the class (``z > 0``). A feature is helpful with probability
``helpful`` (weight in [0.6, 1.5]) or nearly useless (weight in [0, 0.1]); it reads
``w (z + sqrt(r) e0) + sqrt(1 - r) e_j`` with ``r = interaction``: at ``r = 1`` every feature
sees the same noisy view, so a set is as good as its best feature (the paper's combiner with
k = 1); at ``r = 0`` their noises are independent and each added feature helps (k large).
Each feature is one sensor whose energy is ``c0 + c1 n + c2 n^2`` with c0 in [0, 10], c1 in
[0, 0.05], c2 in [0, 5e-5]: over sizes 1..1000 the curves cross often.
"""

from __future__ import annotations

import numpy as np

from adaptedge.protocol.manifest import CostWeights, SensorSpec
from adaptedge.trainer.data.costs import at_reference_size
from adaptedge.trainer.data.dataset_core import Dataset

MAX_SIZE = 1000


def synthetic_polydom(n_features: int = 10, *, n_rows: int = 3000, helpful: float = 0.5,
                      interaction: float = 0.5, seed: int = 0) -> Dataset:
    """A binary dataset with ``n_features`` one-feature sensors whose costs grow with size."""
    rng = np.random.default_rng(seed)
    z, e0 = rng.normal(size=n_rows), rng.normal(size=n_rows)
    useful = rng.random(n_features) < helpful
    w = np.where(useful, rng.uniform(0.6, 1.5, n_features), rng.uniform(0.0, 0.1, n_features))
    r = float(np.clip(interaction, 0.0, 1.0))
    noise = rng.normal(size=(n_rows, n_features))
    X = (w[None, :] * (z + np.sqrt(r) * e0)[:, None] + np.sqrt(1 - r) * noise).astype(np.float32)
    y = (z > 0).astype(np.int64)
    sizes = rng.integers(1, MAX_SIZE + 1, size=n_rows).astype(np.float64)
    coeffs = np.stack([rng.uniform(0, 10, n_features), rng.uniform(0, 0.05, n_features),
                       rng.uniform(0, 5e-5, n_features)], axis=1)
    sensors = tuple(SensorSpec(f"f{j}", (j,), energy_mj=float(coeffs[j, 0]),
                               size_poly=(("energy_mj", tuple(float(c) for c in coeffs[j])),))
                    for j in range(n_features))
    order = rng.permutation(n_rows)
    tr, va, te = np.split(order, [int(0.5 * n_rows), int(0.75 * n_rows)])
    return Dataset(
        name=f"polydom-synthetic-{n_features}", X_train=X[tr], y_train=y[tr], X_val=X[va],
        y_val=y[va], X_test=X[te], y_test=y[te], classes=("0", "1"),
        feature_names=tuple(f"f{j}" for j in range(n_features)),
        sensors=at_reference_size(sensors, float(np.median(sizes[tr]))),
        cost_weights=CostWeights(energy_mj=1.0),
        description=(f"synthetic (indexing paper section 6): {n_features} features, helpful "
                     f"{helpful}, interaction {r}, seed {seed}; energy polynomial in the size"),
        sizes=(sizes[tr], sizes[va], sizes[te]))
