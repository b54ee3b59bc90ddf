"""Seeded stratified splits into train/validation/test index arrays, and the record of a
split that travels with a bundle (``SplitRecipe``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.split_recipe import SplitRecipe


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


def split_digest(parts: Sequence[tuple[npt.NDArray[np.generic], npt.NDArray[np.generic]]]) -> str:
    """SHA-256 of which rows went where: each part's shape, features and labels, in order."""
    h = hashlib.sha256()
    for X, y in parts:
        X64 = np.ascontiguousarray(X, dtype=np.float64)
        h.update(repr(X64.shape).encode())
        h.update(X64.tobytes())
        h.update(np.ascontiguousarray(y, dtype=np.int64).tobytes())
    return h.hexdigest()


def split_recipe(dataset: Any, seed: int) -> SplitRecipe:
    """The manifest's record of ``dataset``'s train/validation/test split drawn with ``seed``."""
    parts = [dataset.split(name) for name in ("train", "validation", "test")]
    total = sum(len(y) for _, y in parts)
    return SplitRecipe(dataset=dataset.name, seed=int(seed),
                       fractions=tuple(round(len(y) / total, 6) for _, y in parts),
                       digest=split_digest(parts))
