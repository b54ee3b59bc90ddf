"""Labelled rows (``protocol.fleet_rows.LabelledRow``) as JSON Lines: one object per line, the
dataclass's fields by name, ``null`` for a feature not measured (NaN). What ``adaptedge
recalibrate --rows`` reads and the drift scenario writes. ``audit_fraction`` may be absent or
``null`` (files written before rows carried it). A regression row's ``hpc_value`` and
``local_value`` are written only for such rows (a classification row's line is as before)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

from adaptedge.protocol.fleet_rows import ROW_KINDS, LabelledRow
from adaptedge.trainer.errors import RowsFileError as RowsFileError

_FIELDS = tuple(f.name for f in fields(LabelledRow))
_VALUES = ("hpc_value", "local_value")
_OPTIONAL = ("audit_fraction", *_VALUES)


def row_to_dict(row: LabelledRow) -> dict[str, Any]:
    out = {name: getattr(row, name) for name in _FIELDS}
    for name in ("request_id", "point", "local_label", "hpc_label"):  # numpy ints too
        out[name] = None if out[name] is None else int(out[name])
    out["received_at"] = float(row.received_at)
    out["audit_fraction"] = None if row.audit_fraction is None else float(row.audit_fraction)
    out["features"] = [None if math.isnan(v) else float(v) for v in row.features]
    for name in _VALUES:  # a regression row's values; absent from a classification row
        value = out.pop(name)
        if row.is_regression:
            out[name] = None if value is None else float(value)
    return out


def row_from_dict(raw: Any) -> LabelledRow:
    """A ``LabelledRow`` from its JSON object (``ValueError`` naming what is wrong)."""
    if not isinstance(raw, dict):
        raise ValueError(f"expected an object, got {type(raw).__name__}")
    missing = [n for n in _FIELDS if n not in raw and n not in _OPTIONAL]
    if missing:
        raise ValueError(f"missing fields {missing}")
    if raw["kind"] not in ROW_KINDS:
        raise ValueError(f"kind must be one of {list(ROW_KINDS)}, got {raw['kind']!r}")
    features = raw["features"]
    if not isinstance(features, list) or not all(
            v is None or (isinstance(v, int | float) and not isinstance(v, bool))
            for v in features):
        raise ValueError("features must be a list of numbers or null")
    for name in ("request_id", "hpc_label"):
        if not isinstance(raw[name], int) or isinstance(raw[name], bool):
            raise ValueError(f"{name} must be an integer")
    for name in ("point", "local_label"):
        if raw[name] is not None and (not isinstance(raw[name], int)
                                      or isinstance(raw[name], bool)):
            raise ValueError(f"{name} must be an integer or null")
    if not isinstance(raw["received_at"], int | float) or isinstance(raw["received_at"], bool):
        raise ValueError("received_at must be a number (seconds)")
    fraction = raw.get("audit_fraction")
    if fraction is not None and (not isinstance(fraction, int | float)
                                 or isinstance(fraction, bool) or not 0 <= fraction <= 1):
        raise ValueError("audit_fraction must be a number in [0, 1] or null")
    values = {name: _value(raw, name) for name in _VALUES}
    return LabelledRow(
        device=str(raw["device"]), bundle_id=str(raw["bundle_id"]),
        request_id=raw["request_id"], kind=raw["kind"], point=raw["point"],
        features=tuple(math.nan if v is None else float(v) for v in features),
        local_label=raw["local_label"], hpc_label=raw["hpc_label"],
        received_at=float(raw["received_at"]),
        audit_fraction=None if fraction is None else float(fraction), **values)


def _value(raw: dict[str, Any], name: str) -> float | None:
    """A regression row's ``name`` (absent or null: None), a finite number."""
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number or null")
    return float(value)


def write_rows(path: str | Path, rows: Iterable[LabelledRow]) -> int:
    """Write ``rows`` to ``path`` (JSON Lines); returns how many."""
    n = 0
    with Path(path).open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row_to_dict(row), allow_nan=False) + "\n")
            n += 1
    return n


def read_rows(path: str | Path) -> list[LabelledRow]:
    """The rows of a JSON Lines file (blank lines skipped)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RowsFileError(f"cannot read rows file {p}: {exc.strerror or exc}") from None
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(row_from_dict(json.loads(line)))
        except ValueError as exc:
            raise RowsFileError(f"{p}:{number}: not a labelled row: {exc}") from None
    return rows
