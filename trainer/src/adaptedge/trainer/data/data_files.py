"""Reading data files: (gzipped) delimited text into rows, numeric cells into float32."""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from adaptedge.trainer.data.dataset_core import DatasetError, Floats


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
    try:
        with open_text(require_file(path)) as fh:
            if delimiter is None:
                return tuple(tuple(line.split()) for line in fh if line.strip())
            return tuple(tuple(row) for row in csv.reader(fh, delimiter=delimiter) if row)
    except (UnicodeDecodeError, csv.Error, gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DatasetError(f"{path}: is not a text (UTF-8) delimited file ({exc}); give a "
                           "CSV/TSV, optionally gzipped") from None


MISSING_HINT = ("missing values are accepted only by train --method adapt-gbrt, greedy-miser "
                "or dag (unmeasured sensors) or train --impute median; else fill them in or "
                "drop the row")
"""What to do about a missing cell, in every refusal of one."""


def is_missing(cell: str) -> bool:
    """An empty cell or ``nan`` (any case): a sensor not measured on that row."""
    text = cell.strip()
    return not text or text.lower() == "nan"


class MissingValueError(DatasetError):
    """A missing cell where missing values are not accepted; the message names its place."""


def _first_bad_cell(rows: Sequence[Sequence[str]], names: Sequence[str], source: str) -> None:
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            try:
                float(cell)
            except ValueError:
                if not cell.strip():
                    raise MissingValueError(
                        f"{source}: column {names[c]!r} row {r + 1} is empty; "
                        + MISSING_HINT) from None
                raise DatasetError(f"{source}: column {names[c]!r} row {r + 1} holds {cell!r}; "
                                   "every feature column must be numeric") from None
    raise DatasetError(f"{source}: rows have different lengths")


def parse_floats(rows: Sequence[Sequence[str]], names: Sequence[str], source: str, *,
                 missing: bool = False) -> Floats:
    """Cells as float32 [rows, columns]; a non-numeric or infinite cell is refused, naming its
    column and (1-based data) row. ``missing``: an empty or ``nan`` cell is NaN (an unmeasured
    sensor), else it is refused too."""
    if missing:
        rows = [["nan" if is_missing(cell) else cell for cell in row] for row in rows]
    try:
        values = np.asarray(rows, dtype=np.float64)
    except ValueError:
        _first_bad_cell(rows, names, source)
        raise  # unreachable: _first_bad_cell always raises
    with np.errstate(over="ignore"):
        out = values.astype(np.float32)
    bad = np.argwhere(np.isinf(out) if missing else ~np.isfinite(out))
    if bad.size:
        r, c = (int(i) for i in bad[0])
        cell = rows[r][c].strip()
        if np.isnan(out[r, c]):
            raise MissingValueError(f"{source}: column {names[c]!r} row {r + 1} holds {cell!r} "
                                    f"(a missing value); {MISSING_HINT}")
        raise DatasetError(f"{source}: column {names[c]!r} row {r + 1} holds {cell!r}, "
                           "which is not a finite float32 number; every feature value must be "
                           "finite or missing (infinities are not supported: fill them in or "
                           "drop the row)")
    return out
