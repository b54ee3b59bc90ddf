"""``--impute median``: missing cells (NaN) filled with a value learnt on the training split,
for methods that cannot learn from unmeasured sensors.

Each feature's NaN cells, in every split, become the median of its measured training values.
Declared departure from the device: the bundle's models and its validation metrics are then of
filled rows, while on a device a NaN still is a failed sensor read (``edge.runtime``); methods
that learn missing values (``trainer.methods.registry.LEARNS_MISSING``) need no imputation and
keep the device's rule in their metrics.
"""

from __future__ import annotations

import numpy as np

from adaptedge.trainer.data.dataset_core import Dataset, DatasetError

IMPUTERS = ("median",)


def impute(dataset: Dataset, how: str) -> Dataset:
    """``dataset`` with every NaN cell replaced by its feature's training median (``how``)."""
    if how not in IMPUTERS:
        raise DatasetError(f"unknown imputation {how!r}; choose one of {list(IMPUTERS)}")
    X = dataset.X_train
    if not np.isnan(X).any() and not np.isnan(dataset.X_val).any() \
            and not np.isnan(dataset.X_test).any():
        return dataset
    measured = ~np.isnan(X)
    if not measured.any(axis=0).all():
        j = int(np.flatnonzero(~measured.any(axis=0))[0])
        raise DatasetError(f"feature {dataset.feature_names[j]!r} is missing on every training "
                           "row: there is no value to impute it with; drop the column")
    fill = np.array([np.median(X[measured[:, j], j]) for j in range(X.shape[1])],
                    dtype=np.float32)

    def filled(A: np.ndarray) -> np.ndarray:
        return np.where(np.isnan(A), fill, A).astype(np.float32)

    n_cells = sum(int(np.isnan(A).sum()) for A in (X, dataset.X_val, dataset.X_test))
    return Dataset(**{**dataset.__dict__, "X_train": filled(X), "X_val": filled(dataset.X_val),
                      "X_test": filled(dataset.X_test),
                      "description": dataset.description + f" {n_cells} missing cells "
                      "imputed with their feature's training median (--impute median)."})
