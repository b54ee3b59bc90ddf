"""The numpy view of a learning problem that every DAG component works on.

Sensors are indexed ``0..M-1``; a sensor set is a sorted tuple of indices. Costs are the
training scalar (``CostWeights``) in ``protocol.costs`` semantics: a decision pays each sensor
it read once, and escalating also pays the HPC's unread sensors and the link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.policy.walk import CostTable

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
SensorSet = tuple[int, ...]
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class Split:
    X: npt.NDArray[np.float32]
    y: IntArray
    hpc_proba: FloatArray
    """The HPC's probabilities (out-of-fold on the training split)."""

    @property
    def hpc_error(self) -> FloatArray:
        wrong: FloatArray = (self.hpc_proba.argmax(axis=1) != self.y).astype(np.float64)
        return wrong


@dataclass(frozen=True)
class DagProblem:
    sensors: tuple[SensorSpec, ...]
    sensor_costs: FloatArray
    """Training-scalar cost of reading each sensor."""
    link_cost: float
    hpc_sensors: SensorSet
    n_classes: int
    splits: dict[str, Split]
    weights: CostWeights | None = None
    """The training scalar's weights (prices a node's ``compute`` in the walk)."""

    @property
    def n_sensors(self) -> int:
        return len(self.sensors)

    @property
    def all_sensors(self) -> SensorSet:
        return tuple(range(self.n_sensors))

    @property
    def total_cost(self) -> float:
        return float(self.sensor_costs.sum())

    def columns(self, sensor_set: Sequence[int]) -> tuple[int, ...]:
        """Feature columns yielded by ``sensor_set``, ascending (the node model's ``inputs``)."""
        return tuple(sorted(c for s in sensor_set for c in self.sensors[s].features))

    def set_cost(self, sensor_set: Sequence[int]) -> float:
        return float(self.sensor_costs[list(sensor_set)].sum()) if len(sensor_set) else 0.0

    def escalation_cost(self, sensor_set: Sequence[int]) -> float:
        """Extra cost of escalating from a node holding ``sensor_set`` (HPC's unread + link)."""
        unread = [s for s in self.hpc_sensors if s not in set(sensor_set)]
        return self.set_cost(unread) + self.link_cost

    def sensor_names(self, sensor_set: Sequence[int]) -> tuple[str, ...]:
        return tuple(self.sensors[s].name for s in sensor_set)

    def cost_table(self) -> CostTable:
        """The walk's cost table (``trainer.policy.walk``)."""
        hpc = np.zeros(self.n_sensors, dtype=bool)
        hpc[list(self.hpc_sensors)] = True
        return CostTable(self.sensor_names(self.all_sensors), self.sensor_costs,
                         self.link_cost, hpc, weights=self.weights,
                         sensor_columns=tuple(tuple(s.features) for s in self.sensors))


def make_problem(*, sensors: Sequence[SensorSpec], weights: CostWeights, link: LinkSpec,
                 n_classes: int, data: dict[str, tuple[Any, Any, Any]],
                 hpc_sensors: Sequence[str] | None = None) -> DagProblem:
    """Build a problem from ``data[split] = (X, y, hpc_proba)`` for ``train``/``val``/``test``."""
    names = [s.name for s in sensors]
    hpc = tuple(range(len(names))) if hpc_sensors is None else tuple(
        sorted(names.index(n) for n in hpc_sensors))
    splits = {}
    for split, (X, y, proba) in data.items():
        splits[split] = Split(np.ascontiguousarray(X, dtype=np.float32),
                              np.asarray(y, dtype=np.int64),
                              np.asarray(proba, dtype=np.float64))
    return DagProblem(
        sensors=tuple(sensors),
        sensor_costs=np.array([weights.sensor_cost(s) for s in sensors], dtype=np.float64),
        link_cost=float(weights.link_cost(link)),
        hpc_sensors=hpc, n_classes=n_classes, splits=splits, weights=weights)


def problem_from(dataset: Any, hpc: Any) -> DagProblem:
    """From ``trainer.data.datasets.Dataset`` and ``trainer.hpc.HpcModel``."""
    hpc_sensors = getattr(hpc, "sensors", None)
    if hpc_sensors is not None:
        hpc_sensors = [s if isinstance(s, str) else s.name for s in hpc_sensors]
    return make_problem(
        sensors=dataset.sensors, weights=dataset.cost_weights, link=dataset.link,
        n_classes=len(dataset.classes), hpc_sensors=hpc_sensors,
        data={"train": (dataset.X_train, dataset.y_train, hpc.oof_proba_train),
              "val": (dataset.X_val, dataset.y_val, hpc.proba_val),
              "test": (dataset.X_test, dataset.y_test, hpc.proba_test)})
