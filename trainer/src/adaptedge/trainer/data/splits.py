"""Seeded stratified splits into train/validation/test index arrays, and the record of a
split that travels with a bundle (``SplitRecipe``)."""

from __future__ import annotations

import hashlib
import math
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


def with_val_fraction(dataset: Any, fraction: float, seed: int) -> Any:
    """``dataset`` with its training and validation rows re-drawn (stratified, seeded) so that
    validation holds ``fraction`` of ALL rows; the test rows stay as they are. ``adaptedge
    train --val-fraction``: more validation rows let the paired rule certify a point."""
    from dataclasses import replace

    from adaptedge.trainer.data.dataset_core import DatasetError

    n_all = len(dataset.y_train) + len(dataset.y_val) + len(dataset.y_test)
    pool_y = np.concatenate([dataset.y_train, dataset.y_val])
    n_val = round(fraction * n_all) if math.isfinite(fraction) else 0
    if not 0 < n_val < len(pool_y) - 1:
        raise DatasetError(f"--val-fraction {fraction:g} asks for {n_val} validation rows of "
                           f"{n_all}, but only {len(pool_y)} are not test rows: give a fraction "
                           f"in (0, {(len(pool_y) - 2) / n_all:.2f})")
    fit, val = _stratified_take(pool_y, n_val, seed)
    pool_X = np.concatenate([dataset.X_train, dataset.X_val])
    sizes = dataset.sizes
    if sizes is not None:
        pool_s = np.concatenate([sizes[0], sizes[1]])
        sizes = (pool_s[fit], pool_s[val], sizes[2])
    return replace(dataset, X_train=pool_X[fit], y_train=pool_y[fit], X_val=pool_X[val],
                   y_val=pool_y[val], sizes=sizes,
                   description=f"{dataset.description} Validation re-drawn from the training "
                               f"rows: {len(val)} rows ({fraction:g} of all).")


def validation_fraction(dataset: Any) -> float:
    """The share of all rows in ``dataset``'s validation split (as ``split_recipe`` records)."""
    n_all = len(dataset.y_train) + len(dataset.y_val) + len(dataset.y_test)
    return round(len(dataset.y_val) / n_all, 6)


def _stratified_take(y: npt.NDArray[np.int64], n_take: int, seed: int
                     ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Seeded stratified draw of exactly ``n_take`` of ``range(len(y))`` (largest-remainder
    quotas per class): (the rest, the drawn), each sorted. Exact, so a recorded share redraws
    the same rows."""
    rng = np.random.default_rng(seed)
    labels, counts = np.unique(y, return_counts=True)
    exact = counts * n_take / len(y)
    quota = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - quota), kind="stable")
    quota[order[: n_take - int(quota.sum())]] += 1
    rest: list[npt.NDArray[np.int64]] = []
    taken: list[npt.NDArray[np.int64]] = []
    for label, q in zip(labels, quota, strict=True):
        members = rng.permutation(np.flatnonzero(y == label))
        taken.append(members[:q])
        rest.append(members[q:])
    return (np.sort(np.concatenate(rest)).astype(np.int64),
            np.sort(np.concatenate(taken)).astype(np.int64))


DEFAULT_CERTIFY_FRACTION = 0.5
"""The share of the validation rows held out for certification (``certify_rows``)."""
CERTIFY_KEY = "certify"
"""Manifest metadata key of the certify hold-out: ``{"fraction", "rows", "seed"}``."""


def certify_rows(y_val: npt.NDArray[np.int64], fraction: float, seed: int
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Validation row indices split into (selection, certify): a seeded stratified draw of
    exactly ``round(fraction * len(y_val))`` certify rows (``_stratified_take``), the rest
    select. The same labels, fraction and seed give the same rows (``adaptedge evaluate``
    re-draws them). Training and every choice of the sweep see the selection rows only; the
    paired bounds of the default rule are measured on the certify rows."""
    from adaptedge.trainer.data.dataset_core import DatasetError

    n_certify = round(fraction * len(y_val)) if math.isfinite(fraction) else 0
    if not 0 < fraction < 1 or not 0 < n_certify < len(y_val) - 1:
        raise DatasetError(f"--certify-fraction {fraction:g} holds out {n_certify} of the "
                           f"{len(y_val)} validation rows; give a fraction in (0, 1) that "
                           f"leaves at least one row on each side and 2 to select with (or "
                           f"more validation rows: --val-fraction)")
    return _stratified_take(y_val, n_certify, seed)


def hold_out_certify(dataset: Any, fraction: float, seed: int
                     ) -> tuple[Any, tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]]:
    """``dataset`` with validation cut to its selection rows, and the certify rows' ``(X, y)``
    (``certify_rows``). Classification only (``values`` must be ``None``)."""
    from dataclasses import replace

    select, certify = certify_rows(dataset.y_val, fraction, seed)
    sizes = dataset.sizes
    if sizes is not None:
        sizes = (sizes[0], sizes[1][select], sizes[2])
    rest = replace(dataset, X_val=dataset.X_val[select], y_val=dataset.y_val[select],
                   sizes=sizes,
                   description=f"{dataset.description} Validation: {len(select)} rows select, "
                               f"{len(certify)} held out to certify ({fraction:g}).")
    return rest, (dataset.X_val[certify], dataset.y_val[certify])
