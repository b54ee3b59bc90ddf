"""Seeded stratified splits of class labels into train/validation/test index arrays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def stratified_split(y: npt.NDArray[np.int64], fractions: Sequence[float], seed: int
                     ) -> list[npt.NDArray[np.int64]]:
    """Seeded stratified partition of ``range(len(y))`` into len(fractions) sorted index arrays."""
    rng = np.random.default_rng(seed)
    parts: list[list[npt.NDArray[np.int64]]] = [[] for _ in fractions]
    bounds = np.cumsum(fractions)[:-1] / float(np.sum(fractions))
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        cuts = np.round(bounds * len(members)).astype(int)
        for part, chunk in zip(parts, np.split(members, cuts), strict=True):
            part.append(chunk)
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]
