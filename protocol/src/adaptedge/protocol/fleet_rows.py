"""Labelled rows from the field: the contract between the cloud's store and recalibration.

The cloud labels every forwarded record with the HPC and stores it. Two kinds arrive:
``escalated`` rows (the gate sent them to the cloud: a biased sample, the hard inputs) and
``audit`` rows (a seeded fraction of locally answered decisions, see ``protocol.audit``: an
unbiased sample of what the device answered on its own). Each row carries the audit fraction
its device used at its operating point (what an audit row's weight is taken from); rows
stored before devices sent it have ``audit_fraction`` None.

A regression bundle's row carries values in the target's unit instead of labels: the HPC's
(``hpc_value``) and the device's own (``local_value``, what an audit compares); its
``hpc_label`` is -1 (``NO_LABEL``) and ``local_label`` None. Classification rows have both
values None and their fields as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RowKind = Literal["escalated", "audit"]
ROW_KINDS: tuple[RowKind, ...] = ("escalated", "audit")


@dataclass(frozen=True, slots=True)
class LabelledRow:
    """One stored row. ``features`` has every feature of the bundle, NaN where not measured;
    ``local_label`` is the device's own answer (None when it had none); ``hpc_label`` is the
    cloud HPC's; ``point`` is the index of the operating point the device was at;
    ``audit_fraction`` the fraction of local decisions the device audited at that point (None:
    not recorded, a row of an older device). A regression row: ``hpc_value`` and
    ``local_value`` (None when the device sent none) in the target's unit, ``hpc_label`` -1."""

    device: str
    bundle_id: str
    request_id: int
    kind: RowKind
    point: int | None
    features: tuple[float, ...]
    local_label: int | None
    hpc_label: int
    received_at: float
    audit_fraction: float | None = None
    hpc_value: float | None = None
    local_value: float | None = None

    @property
    def is_regression(self) -> bool:
        return self.hpc_value is not None
