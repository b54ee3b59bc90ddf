"""Any CSV/TSV(.gz) file as a dataset: a label column, numeric features, optional split column."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from adaptedge.trainer.data.data_files import parse_floats, read_rows
from adaptedge.trainer.data.dataset_core import (
    NOMINAL_NOTE,
    UNIFORM,
    Dataset,
    DatasetError,
    Parts,
    as_regression,
    assemble,
    check_grouping,
    per_feature,
)
from adaptedge.trainer.data.splits import stratified_split

CSV_COST_NOTE = "every feature its own sensor, uniform cost. " + NOMINAL_NOTE
"""The costs part of a CSV dataset's description (``load_dataset`` replaces it with --costs)."""


def csv_dataset(path: Path, target: str | None, grouping: str | None, seed: int, *,
                missing: bool = False, regression: bool = False) -> Dataset:
    """``path`` as a dataset; ``missing``: empty or ``nan`` cells load as NaN (sensors not
    measured on that row), else they are refused naming the first one; ``regression``: the
    target is a number (``numeric_target``; split seeded 60/20/20, not stratified)."""
    if target is None:
        raise DatasetError(f"{path}: a CSV/TSV dataset needs --target COLUMN (the label column)")
    check_grouping(path.name, grouping, ("per-feature",))
    plain = path.name[:-3] if path.name.endswith(".gz") else path.name
    delimiter = "\t" if plain.endswith((".tsv", ".tab")) else ","
    rows = read_rows(path, delimiter)
    if len(rows) < 2:
        raise DatasetError(f"{path}: needs a header row and at least one data row")
    header, body = [h.strip() for h in rows[0]], rows[1:]
    if target not in header:
        raise DatasetError(f"{path}: no target column {target!r}; the columns are {header}")
    bad = [i for i, r in enumerate(body) if len(r) != len(header)]
    if bad:
        raise DatasetError(f"{path}: row {bad[0] + 2} has {len(body[bad[0]])} cells, the header "
                           f"has {len(header)}")
    t = header.index(target)
    s = header.index("split") if "split" in header else None
    feat_cols = [i for i in range(len(header)) if i not in (t, s)]
    if not feat_cols:
        raise DatasetError(f"{path}: no feature columns besides {target!r}")
    names = tuple(header[i] for i in feat_cols)
    if len(set(names)) != len(names):
        raise DatasetError(f"{path}: duplicate column names in the header")
    X = parse_floats([[r[i] for i in feat_cols] for r in body], names, str(path),
                     missing=missing)
    measured = np.isfinite(X)
    if not measured.any(axis=0).all():
        blank = names[int(np.flatnonzero(~measured.any(axis=0))[0])]
        raise DatasetError(f"{path}: column {blank!r} is missing on every row: drop it")
    lo = np.where(measured, X, np.inf).min(axis=0)
    if np.all(lo == np.where(measured, X, -np.inf).max(axis=0)):
        raise DatasetError(f"{path}: every feature column is constant ({names[0]!r} is always "
                           f"{lo[0]:g}, ...): there is nothing to learn from")
    labels = [r[t].strip() for r in body]
    if regression:
        values = numeric_target(path, target, labels)
        labels = ["0"] * len(labels)  # one stratum: a plain seeded split
    classes = sorted_labels(set(labels))
    if len(classes) < 2 and not regression:
        raise DatasetError(f"{path}: target {target!r} has fewer than two classes")
    y = np.array([classes.index(v) for v in labels], dtype=np.int64)
    if s is not None:
        tags = np.array([r[s].strip().lower() for r in body])
        unknown = sorted(set(tags.tolist()) - {"train", "validation", "test"})  # reports-test: tags
        if unknown:
            raise DatasetError(f"{path}: column 'split' holds {unknown}; allowed values are "
                               "train, validation, test")
        splits = tuple(np.flatnonzero(tags == v).astype(np.int64)
                       for v in ("train", "validation", "test"))
        empty = [v for v, idx in zip(("train", "validation", "test"), splits, strict=True)
                 if not idx.size]
        if empty:
            raise DatasetError(f"{path}: column 'split' has no {empty[0]!r} rows")
        how = "splits from the 'split' column"
    else:
        splits = tuple(stratified_split(y, (0.6, 0.2, 0.2), seed))
        how = f"seeded (seed {seed}) stratified 60/20/20 split"
    dataset = assemble(
        Path(plain).stem, Parts(X, y, (splits[0], splits[1], splits[2])), classes, names,
        per_feature(names), UNIFORM,
        f"{path.name}: {'regression ' if regression else ''}target {target!r}, "
        f"{how.replace('stratified ', '') if regression else how}; " + CSV_COST_NOTE)
    return as_regression(dataset, values, splits, target, "") if regression else dataset


def numeric_target(path: Path, target: str, cells: Sequence[str]) -> npt.NDArray[np.float64]:
    """A regression target column as float64, refusing in one line a cell that is not a finite
    number (naming its row)."""
    out = np.empty(len(cells), dtype=np.float64)
    for i, cell in enumerate(cells):
        try:
            out[i] = float(cell)
        except ValueError:
            out[i] = np.nan
        if not np.isfinite(out[i]):
            raise DatasetError(f"{path}: --task regression needs a numeric target, but column "
                               f"{target!r} holds {cell!r} on row {i + 2}; fix that cell or "
                               "drop --task regression to classify")
    return out


MIN_TRAIN_ROWS_PER_CLASS = 2
"""Fewest training rows of a class: the HPC's out-of-fold fit needs the class in every fold's
training part (a class with one training row crashed it)."""


def check_training_classes(name: str, classes: Sequence[str], y_train: npt.NDArray[np.int64]
                           ) -> None:
    """Refuse, before any fit, a class with too few training rows (training only: replay and
    evaluate read such files fine)."""
    counts = np.bincount(y_train, minlength=len(classes))
    rare = [f"{classes[i]!r} ({int(c)})" for i, c in enumerate(counts)
            if c < MIN_TRAIN_ROWS_PER_CLASS]
    if rare:
        raise DatasetError(f"{name}: too few training rows of class {', '.join(rare)}; every "
                           f"class needs at least {MIN_TRAIN_ROWS_PER_CLASS} in the training "
                           "split: add rows of it, merge it into another class, or drop it")


def sorted_labels(values: set[str]) -> tuple[str, ...]:
    try:
        return tuple(sorted(values, key=float))
    except ValueError:
        return tuple(sorted(values))
