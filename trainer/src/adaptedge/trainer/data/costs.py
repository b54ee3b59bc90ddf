"""Sensor costs: the TOML costs file, training-scalar presets, and the arrays methods train with.

A costs file names every sensor, the feature columns it yields and what one read costs in
real units; ``[weights]`` folds those units into the one scalar training trades against
error (``protocol.manifest.CostWeights``); ``[link]`` optionally overrides ``LinkSpec``::

    weights = "energy"          # or a table: [weights] energy_mj = 1.0, latency_ms = 0.1
    [link]
    rtt_ms = 40
    [[sensor]]
    name = "accel"
    features = ["ax", "ay", "az"]
    energy_mj = 0.5
    latency_ms = 2.0
    money = 0.0
    timeout_ms = 50             # optional

A cost may grow with the item's size ``n``: ``[size] column = "n"`` names the CSV column holding
each item's size (never a feature), and any sensor cost may then be a list of non-negative
polynomial coefficients, ``energy_mj = [0.5, 0.02, 0.0001]`` meaning 0.5 + 0.02 n + 0.0001 n^2
(a plain number is still a constant)::

    [size]
    column = "n"
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.errors import CostsError as CostsError

PRESETS: dict[str, CostWeights] = {
    "energy": CostWeights(energy_mj=1.0),
    "latency": CostWeights(energy_mj=0.0, latency_ms=1.0),
    "money": CostWeights(energy_mj=0.0, money=1.0),
    "uniform": CostWeights(energy_mj=0.0, uniform=1.0),
}
_WEIGHT_KEYS = ("energy_mj", "latency_ms", "money", "uniform")
_SENSOR_NUMBERS = ("energy_mj", "latency_ms", "money")


def cost_weights_preset(name: str) -> CostWeights:
    """The training scalar by name: "energy" (default), "latency", "money" or "uniform"."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown cost preset {name!r}; choose one of {sorted(PRESETS)}") from None


def load_costs(path: str | Path, feature_names: Sequence[str]
               ) -> tuple[tuple[SensorSpec, ...], CostWeights, LinkSpec]:
    """Read a TOML costs file for a dataset with ``feature_names``; every feature in one sensor."""
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CostsError(f"{p}: costs file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CostsError(f"{p}: not valid TOML ({exc})") from exc
    unknown = sorted(set(raw) - {"weights", "link", "sensor", "size"})
    if unknown:
        raise CostsError(f"{p}: unknown top-level keys {unknown} (expected weights, link, sensor,"
                         " size)")
    size_column = _parse_size(raw.get("size"), p)
    feature_names = [f for f in feature_names if f != size_column]
    weights = _parse_weights(raw.get("weights", "energy"), p)
    link = _parse_link(raw.get("link", {}), p)
    sensors = _parse_sensors(raw.get("sensor"), p, list(feature_names), size_column is not None)
    return sensors, weights, link


def size_column(path: str | Path) -> str | None:
    """The costs file's ``[size] column`` (the CSV column of item sizes), or None."""
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (FileNotFoundError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None  # load_costs reports it
    return _parse_size(raw.get("size"), p)


def _parse_size(raw: Any, p: Path) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"column"}:
        raise CostsError(f'{p}: size: must be a table with one key, column = "NAME"')
    column = raw["column"]
    if not isinstance(column, str) or not column:
        raise CostsError(f"{p}: size.column: must be a non-empty column name")
    return column


def _cost(value: Any, where: str, sized: bool) -> tuple[float, tuple[float, ...] | None]:
    """A sensor cost: a number (constant) or polynomial coefficients in the item's size."""
    if not isinstance(value, list):
        return _number(value, where), None
    if not sized:
        raise CostsError(f"{where}: a polynomial cost needs the items' sizes: add [size] "
                         'column = "NAME" (the CSV column holding each item\'s size)')
    if not 1 <= len(value) <= 8:
        raise CostsError(f"{where}: give 1..8 polynomial coefficients [c0, c1, ...], "
                         f"got {len(value)}")
    coeffs = tuple(_number(c, f"{where}[{k}]") for k, c in enumerate(value))
    return coeffs[0], coeffs


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CostsError(f"{where}: must be a finite number, got {value!r}")
    if value < 0:
        raise CostsError(f"{where}: must be >= 0, got {value!r}")
    return float(value)


def _parse_weights(raw: Any, p: Path) -> CostWeights:
    if isinstance(raw, str):
        if raw not in PRESETS:
            raise CostsError(f"{p}: weights: unknown preset {raw!r}; "
                             f"choose one of {sorted(PRESETS)}")
        return PRESETS[raw]
    if not isinstance(raw, dict):
        raise CostsError(f"{p}: weights: must be a preset name or a table")
    unknown = sorted(set(raw) - set(_WEIGHT_KEYS))
    if unknown:
        raise CostsError(f"{p}: weights: unknown keys {unknown} (allowed: {list(_WEIGHT_KEYS)})")
    values = {k: _number(raw.get(k, 0.0), f"{p}: weights.{k}") for k in _WEIGHT_KEYS}
    if not any(values.values()):
        raise CostsError(f"{p}: weights: at least one weight must be positive")
    return CostWeights(**values)


def _parse_link(raw: Any, p: Path) -> LinkSpec:
    if not isinstance(raw, dict):
        raise CostsError(f"{p}: link: must be a table")
    allowed = {f.name: f.type for f in dataclasses.fields(LinkSpec)}
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise CostsError(f"{p}: link: unknown keys {unknown} (allowed: {sorted(allowed)})")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        number = _number(value, f"{p}: link.{key}")
        values[key] = int(number) if key.endswith("_bytes") else number
    return LinkSpec(**values)


def _parse_sensors(raw: Any, p: Path, feature_names: list[str], sized: bool = False
                   ) -> tuple[SensorSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise CostsError(f"{p}: needs at least one [[sensor]] table")
    index = {name: i for i, name in enumerate(feature_names)}
    owner: dict[str, str] = {}
    sensors: list[SensorSpec] = []
    for i, item in enumerate(raw):
        where = f"{p}: sensor[{i}]"
        if not isinstance(item, dict):
            raise CostsError(f"{where}: must be a table")
        unknown = sorted(set(item) - {"name", "features", *_SENSOR_NUMBERS, "timeout_ms"})
        if unknown:
            raise CostsError(f"{where}: unknown keys {unknown}")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise CostsError(f"{where}.name: must be a non-empty string")
        if any(s.name == name for s in sensors):
            raise CostsError(f"{where}.name: sensor {name!r} is defined twice")
        features = item.get("features")
        if not isinstance(features, list) or not features:
            raise CostsError(f"{where}.features: must be a non-empty list of column names")
        cols: list[int] = []
        for feat in features:
            if feat not in index:
                raise CostsError(f"{where}.features: unknown column {feat!r} "
                                 f"(the data has {feature_names})")
            if feat in owner:
                raise CostsError(f"{where}.features: column {feat!r} already belongs to sensor "
                                 f"{owner[feat]!r}")
            owner[feat] = name
            cols.append(index[feat])
        timeout = item.get("timeout_ms")
        units = {u: _cost(item.get(u, 0.0), f"{where}.{u}", sized) for u in _SENSOR_NUMBERS}
        sensors.append(SensorSpec(
            name=name, features=tuple(cols),
            energy_mj=units["energy_mj"][0], latency_ms=units["latency_ms"][0],
            money=units["money"][0],
            timeout_ms=None if timeout is None else _number(timeout, f"{where}.timeout_ms"),
            size_poly=tuple((u, c) for u, (_, c) in units.items() if c is not None),
        ))
    missing = [f for f in feature_names if f not in owner]
    if missing:
        raise CostsError(f"{p}: features not assigned to any sensor: {missing}; list each in "
                         "one [[sensor]]'s features (or drop the column from the data)")
    return tuple(sensors)


def at_reference_size(sensors: Sequence[SensorSpec], size: float) -> tuple[SensorSpec, ...]:
    """The sensors with each polynomial unit's plain field set to its cost at ``size`` (the
    median training size: what size-unaware code charges)."""
    out = []
    for s in sensors:
        values: dict[str, Any] = {unit: float(np.polynomial.polynomial.polyval(size, coeffs))
                                  for unit, coeffs in s.size_poly}
        out.append(dataclasses.replace(s, **values) if values else s)
    return tuple(out)


def feature_sensor_index(sensors: Sequence[SensorSpec], n_features: int) -> npt.NDArray[np.int64]:
    """``index[j]`` = position in ``sensors`` of the sensor yielding feature ``j``.

    Raises ``ValueError`` unless the sensors partition ``range(n_features)`` exactly.
    """
    index = np.full(n_features, -1, dtype=np.int64)
    for s, spec in enumerate(sensors):
        for col in spec.features:
            if not 0 <= col < n_features:
                raise ValueError(f"sensor {spec.name!r} yields feature {col}, out of range "
                                 f"(there are {n_features})")
            if index[col] >= 0:
                raise ValueError(f"feature {col} belongs to both {sensors[index[col]].name!r} "
                                 f"and {spec.name!r}")
            index[col] = s
    orphans = np.flatnonzero(index < 0)
    if orphans.size:
        raise ValueError(f"features {orphans.tolist()} belong to no sensor")
    return index


def sensor_cost_vector(sensors: Sequence[SensorSpec], weights: CostWeights, n_features: int
                       ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Per-sensor training-scalar costs and the feature -> sensor index map.

    Returns ``(costs, feature_sensor)``: ``costs[s] = weights.sensor_cost(sensors[s])`` (what
    reading sensor ``s`` costs, in ``protocol.costs`` semantics) and ``feature_sensor[j]`` the
    sensor index of feature ``j``. Buying any feature of a sensor buys all of its features.
    """
    costs = np.array([weights.sensor_cost(s) for s in sensors], dtype=np.float64)
    return costs, feature_sensor_index(sensors, n_features)
