"""In-memory data for ``train_bundle``: a pandas DataFrame with a target column, or ``(X, y)``
arrays (X may be a DataFrame, whose column names become the feature names).

They go through the one CSV loader (``trainer.data.csv_dataset``), written to a temporary file,
so arrays get exactly the checks, splits, missing-value rule and description a CSV gets.
"""

from __future__ import annotations

import csv
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adaptedge.trainer.data.dataset_core import DatasetError

ARRAY_TARGET = "target"


def _is_frame(data: Any) -> bool:
    return hasattr(data, "columns") and hasattr(data, "to_numpy")


def _table(data: Any, target: str | None) -> tuple[list[str], list[Sequence[Any]], str]:
    """(header, rows, target column) of a DataFrame or an ``(X, y)`` pair."""
    import numpy as np

    if _is_frame(data):
        if target is None or target not in data.columns:
            raise DatasetError(f"a DataFrame needs target= one of its columns "
                               f"{list(map(str, data.columns))[:8]}")
        return [str(c) for c in data.columns], data.to_numpy(dtype=object).tolist(), target
    if not (isinstance(data, tuple) and len(data) == 2):
        raise DatasetError("data must be a dataset name, a CSV/TSV path, a DataFrame with "
                           f"target=, or an (X, y) pair; got {type(data).__name__}")
    X, y = data
    names = ([str(c) for c in X.columns] if _is_frame(X)
             else [f"x{i}" for i in range(np.asarray(X).shape[1])])
    values = np.asarray(X.to_numpy() if _is_frame(X) else X, dtype=np.float64)
    labels = np.asarray(y).reshape(-1)
    if values.ndim != 2 or len(values) != len(labels):
        raise DatasetError(f"X must be 2-D with one row per label; got shape {values.shape} "
                           f"for {len(labels)} labels")
    label = target or ARRAY_TARGET
    if label in names:
        raise DatasetError(f"a feature is named {label!r}: pass target= another name")
    rows: list[Sequence[Any]] = [[*map(repr, row), str(t)]
                                 for row, t in zip(values.tolist(), labels, strict=True)]
    return [*names, label], rows, label


@contextmanager
def tabular_source(data: Any, target: str | None) -> Iterator[tuple[str, str | None]]:
    """(what ``load_dataset`` takes, target): a name or path as given, else a temporary CSV."""
    if isinstance(data, str | Path):
        yield str(data), target
        return
    header, rows, label = _table(data, target)
    stem = "frame" if _is_frame(data) else "arrays"
    with tempfile.TemporaryDirectory(prefix="adaptedge-data-") as tmp:
        path = Path(tmp) / f"{stem}.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(["" if v is None else v for v in row] for row in rows)
        yield str(path), label
