"""The validation figures a drift monitor compares the field with (``cloud.drift``).

A bundle may carry, per operating point, ``metadata["drift_reference"][point]``: the escalation
rate on ``n_rows`` validation rows and the agreement of the local answers with the HPC on
``n_local`` locally answered rows (written by every trained bundle's export,
``trainer.export.bundle``, and by ``adaptedge recalibrate``). Without it (an older bundle)
only the point's escalation rate is known.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adaptedge.protocol.manifest import Manifest

REFERENCE_KEY = "drift_reference"
"""``Manifest.metadata[REFERENCE_KEY][point name]``: the validation figures a monitor needs
(``escalation_rate``, ``n_rows``, ``local_agreement``, ``n_local``)."""


@dataclass(frozen=True, slots=True)
class Reference:
    """The validation figures of one operating point: escalation rate on ``n_rows`` rows and,
    when known, agreement of local answers with the HPC on ``n_local`` locally answered rows.
    ``n_rows`` / ``n_local`` of ``None``: the figure is taken as exact (no interval)."""

    escalation_rate: float
    n_rows: int | None = None
    local_agreement: float | None = None
    n_local: int | None = None


def reference_from_manifest(manifest: Manifest, point: str) -> Reference:
    """The validation figures of operating point ``point``: ``metadata["drift_reference"]``
    when the bundle carries them (trainer export, ``adaptedge recalibrate``),
    else only the point's escalation rate, taken as exact (no agreement chart)."""
    spec = manifest.operating_point(point)  # KeyError names an unknown point
    figures = manifest.metadata.get(REFERENCE_KEY, {})
    raw = figures.get(point) if isinstance(figures, Mapping) else None
    if not isinstance(raw, Mapping):
        return Reference(escalation_rate=spec.escalation_rate)
    return reference_from_dict(raw)


def reference_from_dict(raw: Mapping[str, Any]) -> Reference:
    """A ``Reference`` from its JSON object (``ValueError`` naming a bad field)."""
    def number(key: str, integer: bool = False) -> Any:
        value = raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                0 <= value <= (math.inf if integer else 1)) or (integer and value != int(value)):
            raise ValueError(f"drift reference field {key!r} is {value!r}: expected "
                             f"{'a count >= 0' if integer else 'a rate in [0, 1]'}")
        return int(value) if integer else float(value)

    rate = number("escalation_rate")
    if rate is None:
        raise ValueError("drift reference lacks 'escalation_rate'")
    return Reference(escalation_rate=rate, n_rows=number("n_rows", True),
                     local_agreement=number("local_agreement"), n_local=number("n_local", True))
