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

PRESETS: dict[str, CostWeights] = {
    "energy": CostWeights(energy_mj=1.0),
    "latency": CostWeights(energy_mj=0.0, latency_ms=1.0),
    "money": CostWeights(energy_mj=0.0, money=1.0),
    "uniform": CostWeights(energy_mj=0.0, uniform=1.0),
}
_WEIGHT_KEYS = ("energy_mj", "latency_ms", "money", "uniform")
_SENSOR_NUMBERS = ("energy_mj", "latency_ms", "money")


class CostsError(ValueError):
    """A costs file that cannot be used; the message names the file and the field."""


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
    unknown = sorted(set(raw) - {"weights", "link", "sensor"})
    if unknown:
        raise CostsError(f"{p}: unknown top-level keys {unknown} (expected weights, link, sensor)")
    weights = _parse_weights(raw.get("weights", "energy"), p)
    link = _parse_link(raw.get("link", {}), p)
    sensors = _parse_sensors(raw.get("sensor"), p, list(feature_names))
    return sensors, weights, link


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


def _parse_sensors(raw: Any, p: Path, feature_names: list[str]) -> tuple[SensorSpec, ...]:
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
        sensors.append(SensorSpec(
            name=name, features=tuple(cols),
            energy_mj=_number(item.get("energy_mj", 0.0), f"{where}.energy_mj"),
            latency_ms=_number(item.get("latency_ms", 0.0), f"{where}.latency_ms"),
            money=_number(item.get("money", 0.0), f"{where}.money"),
            timeout_ms=None if timeout is None else _number(timeout, f"{where}.timeout_ms"),
        ))
    missing = [f for f in feature_names if f not in owner]
    if missing:
        raise CostsError(f"{p}: features not assigned to any sensor: {missing}")
    return tuple(sensors)


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
