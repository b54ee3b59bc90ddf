"""Audit sampling: which locally answered decisions also get an HPC label.

A device answers most inputs locally; nobody then knows whether the local answer agrees with
the HPC. An audit reads, for a small seeded fraction of local decisions, the sensors the HPC
needs as well and forwards the row for labelling, so the fleet gets an unbiased estimate of the
local model's agreement with the HPC. The choice is a keyed hash of (seed, device, decision
index), not a random stream: the edge runtime, the batched replay and a re-run of either pick
the same decisions, and the choice does not depend on the input (so it cannot bias the sample).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

DEFAULT_AUDIT_FRACTION = 0.02
"""A small default: 2% of local decisions pay for the HPC's sensors and a trip to the cloud."""

_SCALE = float(1 << 64)


def _check_fraction(what: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{what} must be a fraction in [0, 1], got {value!r}")


@dataclass(frozen=True)
class AuditPolicy:
    """``fraction`` of local decisions are audited; ``per_point`` overrides it by the operating
    point's index. ``seed`` keys the choice (state it in reports)."""

    fraction: float = DEFAULT_AUDIT_FRACTION
    seed: int = 0
    per_point: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_fraction("audit fraction", self.fraction)
        for point, value in self.per_point.items():
            _check_fraction(f"audit fraction of operating point {point}", value)

    def fraction_at(self, point: int | None) -> float:
        if point is None:
            return self.fraction
        return self.per_point.get(point, self.fraction)

    def selected(self, device: str, decision_index: int, point: int | None = None) -> bool:
        """True when decision number ``decision_index`` of ``device`` is audited."""
        fraction = self.fraction_at(point)
        if fraction <= 0.0:
            return False
        return _unit(self.seed, device, decision_index) < fraction

    def selected_many(self, device: str, decision_indices: npt.ArrayLike,
                      point: int | None = None) -> npt.NDArray[np.bool_]:
        """``selected`` for many decisions of one device (for batched replay)."""
        indices = np.asarray(decision_indices, dtype=np.int64).ravel()
        fraction = self.fraction_at(point)
        if fraction <= 0.0:
            return np.zeros(indices.shape, dtype=bool)
        units = np.fromiter((_unit(self.seed, device, int(i)) for i in indices),
                            dtype=np.float64, count=indices.size)
        return units < fraction


def _unit(seed: int, device: str, decision_index: int) -> float:
    """A uniform number in [0, 1) from the key (seed, device, decision index)."""
    key = f"{seed}:{device}:{decision_index}".encode()
    digest = hashlib.blake2b(key, digest_size=8, person=b"adaptedge-audit").digest()
    return int.from_bytes(digest, "big") / _SCALE
