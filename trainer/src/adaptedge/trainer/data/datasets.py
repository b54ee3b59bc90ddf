"""Datasets with sensors and costs: the built-in benchmarks (vendored in ``data/``) and any CSV.

numpy + stdlib only (the edge CLI replays datasets on devices). ``load_dataset(name_or_path)``
returns a ``Dataset``: float32 features, int64 class indices, fixed train/validation/test
splits, the sensors that partition the features, the default training scalar and the link.
Provenance of every vendored file is in ``data/README.md``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptedge.trainer.data.builtin_datasets import BUILTINS
from adaptedge.trainer.data.costs import at_reference_size, load_costs, size_column
from adaptedge.trainer.data.csv_dataset import CSV_COST_NOTE, csv_dataset
from adaptedge.trainer.data.dataset_core import (
    Dataset,
    DatasetError,
    Floats,
    Labels,
    SplitName,
    Task,
    data_dir,
)
from adaptedge.trainer.data.regression_datasets import REGRESSION_BUILTINS
from adaptedge.trainer.data.splits import stratified_split

__all__ = [
    "Dataset",
    "DatasetError",
    "Floats",
    "Labels",
    "SplitName",
    "data_dir",
    "list_datasets",
    "load_dataset",
    "stratified_split",
]


def list_datasets() -> list[str]:
    """Names of the built-in datasets."""
    return sorted({**BUILTINS, **REGRESSION_BUILTINS})


def _builtin(name: str, task: Task | None, grouping: str | None, seed: int) -> Dataset:
    """A built-in by name; its task is fixed (``task``, when given, must match it)."""
    regression = name in REGRESSION_BUILTINS
    if task is not None and (task == "regression") != regression:
        fitting = sorted(REGRESSION_BUILTINS) if task == "regression" else sorted(BUILTINS)
        raise DatasetError(f"built-in dataset {name!r} is not a {task} dataset; {task} "
                           f"built-ins are {fitting}, or give a CSV with a numeric --target")
    return (REGRESSION_BUILTINS if regression else BUILTINS)[name](grouping, seed)


def load_dataset(name_or_path: str, *, target: str | None = None, costs: str | Path | None = None,
                 grouping: str | None = None, seed: int = 0, missing: bool = False,
                 task: Task | None = None) -> Dataset:
    """A built-in dataset by name (see ``list_datasets``) or a CSV/TSV(.gz) file with ``target``.

    ``costs`` (a TOML file, see ``trainer.data.costs``) replaces the sensors, training weights and
    link; ``grouping`` picks a built-in sensor grouping (e.g. ``letter``: "4x4" or
    "per-feature"); ``seed`` fixes every random split; ``missing``: a CSV's empty or ``nan``
    cells load as NaN (an unmeasured sensor; else they are refused); ``task``: "regression"
    reads a CSV's ``target`` as a number (a built-in's task is fixed: ``gas-concentration``
    is the regression one; None: classification for a CSV).
    """
    if name_or_path in BUILTINS or name_or_path in REGRESSION_BUILTINS:
        if target is not None:
            raise DatasetError(f"built-in dataset {name_or_path!r} has a fixed target; drop "
                               "--target (it is for CSV files)")
        dataset = _builtin(name_or_path, task, grouping, seed)
    else:
        path = Path(name_or_path)
        looks_like_file = path.suffix in (".csv", ".tsv", ".tab", ".gz", ".txt") or path.exists()
        if not looks_like_file:
            raise DatasetError(f"unknown dataset {name_or_path!r}; built-ins are "
                               f"{list_datasets()}, or give a path to a CSV/TSV(.gz) file")
        if not path.is_file():
            raise DatasetError(f"data file {path} not found")
        dataset = csv_dataset(path, target, grouping, seed, missing=missing,
                              regression=task == "regression")
    if costs is not None:
        if grouping is not None:
            raise DatasetError("give either a costs file or a grouping, not both (the costs "
                               "file defines the sensors)")
        dataset = with_size_column(dataset, size_column(costs))
        sensors, weights, link = load_costs(costs, dataset.feature_names)
        if dataset.sizes is not None:
            sensors = at_reference_size(sensors, float(np.median(dataset.sizes[0])))
        dataset = Dataset(**{**dataset.__dict__, "sensors": sensors, "cost_weights": weights,
                             "link": link,
                             "description": dataset.description.replace(f"; {CSV_COST_NOTE}",
                                                                        ".")
                             + f" Sensors and costs from {Path(costs).name}."})
    return dataset


def with_size_column(dataset: Dataset, column: str | None) -> Dataset:
    """``dataset`` with feature ``column`` moved out of the features into the item sizes."""
    if column is None:
        return dataset
    if column not in dataset.feature_names:
        raise DatasetError(f"the costs file's size column {column!r} is not in the data "
                           f"(columns: {list(dataset.feature_names)})")
    j = dataset.feature_names.index(column)
    keep = [i for i in range(dataset.n_features) if i != j]
    sizes = tuple(np.asarray(X[:, j], dtype=np.float64) for X in
                  (dataset.X_train, dataset.X_val, dataset.X_test))
    if any((~np.isfinite(n)).any() or (n < 0).any() for n in sizes):
        raise DatasetError(f"size column {column!r} must hold finite numbers >= 0")
    return Dataset(**{**dataset.__dict__,
                      "X_train": dataset.X_train[:, keep], "X_val": dataset.X_val[:, keep],
                      "X_test": dataset.X_test[:, keep],
                      "feature_names": tuple(n for n in dataset.feature_names if n != column),
                      "sizes": (sizes[0], sizes[1], sizes[2])})
