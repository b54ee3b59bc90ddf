"""Replayed rows as a device's live sensors: ``ReplayRows`` and the readers that serve them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.edge.errors import DeviceError
from adaptedge.edge.sensors import Reader
from adaptedge.protocol.manifest import Manifest


@dataclass(frozen=True)
class ReplayRows:
    """Rows to offer a device's sensors one at a time, with each row's true label."""

    X: npt.NDArray[Any]
    """One row per decision, the bundle's features in order."""
    truth: Sequence[str]
    """Each row's true class name (journaled beside the decision)."""
    feature_names: Sequence[str]
    source: str = "rows"
    """What is replayed (a dataset name or file), for the journal and the messages."""
    split: str = "test"
    sizes: npt.NDArray[Any] | None = None
    """Each item's own size, when costs grow with it (None: no sizes)."""

    def __post_init__(self) -> None:
        if self.X.ndim != 2 or len(self.truth) != len(self.X) or (
                self.sizes is not None and len(self.sizes) != len(self.X)):
            raise DeviceError(f"replay rows of {self.source!r}: X must be 2-D with one truth "
                              f"label (and one size, if any) per row; got X {self.X.shape}, "
                              f"{len(self.truth)} labels")

    def __len__(self) -> int:
        return len(self.X)

    def size(self, index: int) -> float | None:
        return None if self.sizes is None else float(self.sizes[index])

    def check(self, manifest: Manifest) -> None:
        """Refuse rows whose features are not the bundle's."""
        if tuple(manifest.feature_names) != tuple(self.feature_names):
            raise DeviceError(
                f"bundle features {list(manifest.feature_names)[:4]}... do not match dataset "
                f"{self.source!r} features {list(self.feature_names)[:4]}...: replay the data "
                "the bundle was trained on")


class RowSensors:
    """The bundle's sensors, each reading its columns of the row last ``show``n."""

    def __init__(self, manifest: Manifest) -> None:
        self._current: dict[str, npt.NDArray[Any]] = {}
        self._columns = {s.name: np.asarray(s.features, dtype=np.intp) for s in manifest.sensors}
        self.readers: dict[str, Reader] = {name: self._reader(name) for name in self._columns}

    def show(self, row: npt.NDArray[Any]) -> None:
        for name, columns in self._columns.items():
            self._current[name] = row[columns]

    def _reader(self, name: str) -> Reader:
        return lambda: self._current[name]
