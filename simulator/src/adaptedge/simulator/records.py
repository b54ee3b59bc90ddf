"""The result of a run (replay or HIL): one row per decision, in columns, plus run metadata.

Replay and HIL produce the same ``RunResult`` so that reports and comparisons never care
where the decisions came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

SOURCES = ("local", "cloud", "degraded")


@dataclass
class DecisionColumns:
    """Append-only per-decision columns (plain lists while running; ``freeze`` makes arrays)."""

    device: list[str] = field(default_factory=list)
    row: list[int] = field(default_factory=list)
    t_start: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    label: list[int] = field(default_factory=list)
    truth: list[int] = field(default_factory=list)
    source: list[str] = field(default_factory=list)
    escalated: list[bool] = field(default_factory=list)
    """The policy chose to escalate (whether or not a request could be sent)."""
    sent: list[bool] = field(default_factory=list)
    """A request went out to the cloud (what the link and cloud costs are charged on)."""
    sensors: list[tuple[str, ...]] = field(default_factory=list)
    energy_mj: list[float] = field(default_factory=list)
    """The runtime's own ``Decision.cost.energy_mj`` (protocol.costs), as it reported it."""
    request_id: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    """A regression run's answers (``Decision.value``), in the target's unit; empty for
    classification (``label`` is then -1 per row)."""
    target: list[float] = field(default_factory=list)
    """A regression run's true values; empty for classification (``truth`` is then -1)."""

    def __len__(self) -> int:
        return len(self.label)


def _no_floats() -> npt.NDArray[np.float64]:
    return np.zeros(0, dtype=np.float64)


@dataclass(eq=False)
class ColumnArrays:
    """``DecisionColumns`` as numpy arrays (what the batched replay builds: no per-row objects).

    ``source`` and ``device`` hold str, ``sensors`` tuples of sensor names (object arrays).
    """

    device: npt.NDArray[np.object_]
    row: npt.NDArray[np.int64]
    t_start: npt.NDArray[np.float64]
    latency_ms: npt.NDArray[np.float64]
    label: npt.NDArray[np.int64]
    truth: npt.NDArray[np.int64]
    source: npt.NDArray[np.object_]
    escalated: npt.NDArray[np.bool_]
    sent: npt.NDArray[np.bool_]
    sensors: npt.NDArray[np.object_]
    energy_mj: npt.NDArray[np.float64]
    request_id: npt.NDArray[np.int64]
    value: npt.NDArray[np.float64] = field(default_factory=_no_floats)
    """As ``DecisionColumns.value`` (empty for classification)."""
    target: npt.NDArray[np.float64] = field(default_factory=_no_floats)

    def __len__(self) -> int:
        return len(self.label)

    def __eq__(self, other: object) -> bool:
        """Same values row by row, column by column (also against ``DecisionColumns``)."""
        if not isinstance(other, ColumnArrays | DecisionColumns):
            return NotImplemented
        return all(len(getattr(self, f)) == len(getattr(other, f))
                   and all(a == b for a, b in zip(getattr(self, f), getattr(other, f),
                                                  strict=True))
                   for f in DecisionColumns.__dataclass_fields__)


@dataclass
class RunResult:
    """Decisions of one run plus what produced them."""

    mode: str
    """"replay" or "hil"."""
    bundle_id: str
    operating_point: str
    classes: tuple[str, ...]
    columns: DecisionColumns | ColumnArrays
    outages: list[tuple[float, float]] = field(default_factory=list)
    """(start_s, end_s) of link outages, seconds from the run's start."""
    duration_s: float = 0.0
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    regression: bool = False
    """The decisions answer values (``columns.value`` against ``columns.target``)."""

    @property
    def n(self) -> int:
        return len(self.columns)

    def values(self) -> npt.NDArray[np.float64]:
        return np.asarray(self.columns.value, dtype=np.float64)

    def targets(self) -> npt.NDArray[np.float64]:
        return np.asarray(self.columns.target, dtype=np.float64)

    def errors(self) -> dict[str, float]:
        """A regression run's ``mse`` (target unit squared), ``mae`` and ``rmse`` (its unit)."""
        if not self.regression or not self.n:
            nan = float("nan")
            return {"mse": nan, "mae": nan, "rmse": nan}
        diff = self.values() - self.targets()
        mse = float(np.mean(diff * diff))
        return {"mse": mse, "mae": float(np.mean(np.abs(diff))), "rmse": float(np.sqrt(mse))}

    def labels(self) -> npt.NDArray[np.int64]:
        return np.asarray(self.columns.label, dtype=np.int64)

    def truth(self) -> npt.NDArray[np.int64]:
        return np.asarray(self.columns.truth, dtype=np.int64)

    def sources(self) -> npt.NDArray[np.str_]:
        return np.asarray(self.columns.source, dtype=str)

    def accuracy(self) -> float:
        """The fraction of labels right (NaN for a regression run: see ``errors``)."""
        if not self.n or self.regression:
            return float("nan")
        return float(np.mean(self.labels() == self.truth()))

    def rate(self, source: str) -> float:
        return float(np.mean(self.sources() == source)) if self.n else float("nan")

    def escalation_rate(self) -> float:
        return float(np.mean(np.asarray(self.columns.escalated, bool))) if self.n else float("nan")

    def sent_rate(self) -> float:
        return float(np.mean(np.asarray(self.columns.sent, bool))) if self.n else float("nan")

    def keyed(self) -> dict[tuple[str, int], tuple[int, str, bool, tuple[str, ...]]]:
        """(device, row) -> (label, source, escalated, sorted sensors), to compare two runs."""
        c = self.columns
        return {(d, r): (lab, src, esc, tuple(sorted(s)))
                for d, r, lab, src, esc, s in zip(c.device, c.row, c.label, c.source,
                                                   c.escalated, c.sensors, strict=True)}


def sensor_sets(columns: DecisionColumns | ColumnArrays) -> Sequence[tuple[str, ...]]:
    return list(columns.sensors)
