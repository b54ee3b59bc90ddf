"""The ``Dataset`` every method trains on, its error, and the helpers that build one:
sensors per feature or per group, and assembling split arrays into a ``Dataset``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.data.costs import PRESETS, feature_sensor_index
from adaptedge.trainer.errors import DatasetError as DatasetError

SplitName = Literal["train", "validation", "test"]
Floats = npt.NDArray[np.float32]
Labels = npt.NDArray[np.int64]
Targets = npt.NDArray[np.float64]
Task = Literal["classification", "regression"]
NO_CLASS = -1
"""The class index a regression dataset's ``y_*`` hold on every row (it has no classes)."""

UNIFORM = PRESETS["uniform"]
NOMINAL_NOTE = ("Sensor costs in real units are nominal (the data gives none): 1 mJ and 1 ms per "
                "feature read.")


@dataclass(frozen=True)
class Dataset:
    name: str
    X_train: Floats
    y_train: Labels
    X_val: Floats
    y_val: Labels
    X_test: Floats
    y_test: Labels
    classes: tuple[str, ...]
    feature_names: tuple[str, ...]
    sensors: tuple[SensorSpec, ...]
    cost_weights: CostWeights
    link: LinkSpec = field(default_factory=LinkSpec)
    description: str = ""
    sizes: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64],
                 npt.NDArray[np.float64]] | None = None
    """Each item's size (train, validation, test) when sensor costs grow with it, else None."""
    values: tuple[Targets, Targets, Targets] | None = None
    """Regression: the numeric target of every row (train, validation, test), ``classes``
    empty and ``y_*`` all ``NO_CLASS``; None for classification."""
    target_name: str = ""
    """Regression: the target column's name."""
    target_unit: str = ""
    """Regression: the target's unit (e.g. "ppmv"; empty when unknown)."""

    @property
    def task(self) -> Task:
        return "classification" if self.values is None else "regression"

    @property
    def is_regression(self) -> bool:
        return self.values is not None

    def targets(self, name: SplitName) -> Targets:
        """The regression target of a split (refused for a classification dataset)."""
        if self.values is None:
            raise DatasetError(f"dataset {self.name!r} is a classification dataset: it has no "
                               "numeric target; use --task regression with a numeric --target")
        self.split(name)  # refuses an unknown split name
        return self.values[("train", "validation", "test").index(name)]

    def split_sizes(self, name: SplitName) -> npt.NDArray[np.float64] | None:
        """The item sizes of a split (None: costs do not depend on the size)."""
        if self.sizes is None:
            return None
        return self.sizes[("train", "validation", "test").index(name)]

    def split(self, name: SplitName) -> tuple[Floats, Labels]:
        """``(X, y)`` of "train", "validation" or "test"."""
        if name == "train":
            return self.X_train, self.y_train
        if name == "validation":
            return self.X_val, self.y_val
        if name == "test":
            return self.X_test, self.y_test
        raise DatasetError(f"unknown split {name!r}; choose train, validation or test")

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def n_classes(self) -> int:
        return len(self.classes)


def data_dir() -> Path:
    """Where the vendored data lives: ``$ADAPTEDGE_DATA_DIR`` or the package's ``data/vendored/``."""
    env = os.environ.get("ADAPTEDGE_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parent / "vendored"


def per_feature(names: Sequence[str], *, energy: float = 1.0, latency: float = 1.0,
                 money: Sequence[float] | None = None) -> tuple[SensorSpec, ...]:
    return tuple(SensorSpec(name, (i,), energy_mj=energy, latency_ms=latency,
                            money=0.0 if money is None else float(money[i]))
                 for i, name in enumerate(names))


def sensor_groups(names: Sequence[str], groups: Sequence[Sequence[int]], *,
            per_feature_nominal: bool = True, energy: float = 1.0, latency: float = 1.0
            ) -> tuple[SensorSpec, ...]:
    """Sensors ``names[i]`` owning ``groups[i]``; nominal cost per feature or per sensor."""
    return tuple(SensorSpec(n, tuple(g),
                            energy_mj=energy * (len(g) if per_feature_nominal else 1),
                            latency_ms=latency * (len(g) if per_feature_nominal else 1))
                 for n, g in zip(names, groups, strict=True))


def check_grouping(name: str, grouping: str | None, allowed: Sequence[str]) -> str:
    if grouping is None:
        return allowed[0]
    if grouping not in allowed:
        raise DatasetError(f"dataset {name!r} has no grouping {grouping!r}; choose one of "
                           f"{list(allowed)}")
    return grouping


def as_regression(dataset: Dataset, values: Targets, splits: Sequence[npt.NDArray[np.int64]],
                  target: str, unit: str) -> Dataset:
    """``dataset`` (already split by ``splits``) as a regression on ``values`` (all rows, in
    the order ``splits`` index): no classes, every ``y_*`` ``NO_CLASS``."""
    v = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise DatasetError(f"{dataset.name}: regression target {target!r} must be finite on "
                           "every row (NaN or inf found): drop or fill those rows")
    parts = tuple(v[idx] for idx in splits)
    no_class = {key: np.full(len(part), NO_CLASS, dtype=np.int64)
                for key, part in zip(("y_train", "y_val", "y_test"), parts, strict=True)}
    return Dataset(**{**dataset.__dict__, **no_class, "classes": (),
                      "values": (parts[0], parts[1], parts[2]), "target_name": target,
                      "target_unit": unit})


@dataclass(frozen=True)
class Parts:
    """A dataset before splitting: all rows plus split indices."""

    X: Floats
    y: Labels
    splits: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]


def assemble(name: str, parts: Parts, classes: Sequence[str], feature_names: Sequence[str],
              sensors: tuple[SensorSpec, ...], weights: CostWeights, description: str,
              link: LinkSpec | None = None) -> Dataset:
    tr, va, te = parts.splits
    feature_sensor_index(sensors, len(feature_names))  # sensors partition the features
    return Dataset(name=name,
                   X_train=parts.X[tr], y_train=parts.y[tr],
                   X_val=parts.X[va], y_val=parts.y[va],
                   X_test=parts.X[te], y_test=parts.y[te],
                   classes=tuple(classes), feature_names=tuple(feature_names),
                   sensors=sensors, cost_weights=weights, link=link or LinkSpec(),
                   description=description)
