"""Reading data files: (gzipped) delimited text into rows, numeric cells into float32."""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from adaptedge.trainer.dataset_core import DatasetError, Floats


def open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open("r", encoding="utf-8", newline="")


def require_file(path: Path) -> Path:
    if not path.is_file():
        raise DatasetError(f"data file {path} is missing: set ADAPTEDGE_DATA_DIR to the folder "
                           "holding adaptedge's vendored data/")
    return path


@lru_cache(maxsize=16)
def read_rows(path: Path, delimiter: str | None) -> tuple[tuple[str, ...], ...]:
    """Rows of a (gzipped) delimited text file; ``delimiter=None`` splits on whitespace."""
    with open_text(require_file(path)) as fh:
        if delimiter is None:
            return tuple(tuple(line.split()) for line in fh if line.strip())
        return tuple(tuple(row) for row in csv.reader(fh, delimiter=delimiter) if row)


def parse_floats(rows: Sequence[Sequence[str]], names: Sequence[str], source: str) -> Floats:
    try:
        return np.asarray(rows, dtype=np.float64).astype(np.float32)
    except ValueError:
        pass
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            try:
                float(cell)
            except ValueError:
                what = "is empty" if not cell.strip() else f"holds {cell!r}"
                raise DatasetError(f"{source}: column {names[c]!r} row {r + 1} {what}; every "
                                   "feature column must be numeric") from None
    raise DatasetError(f"{source}: rows have different lengths")
