"""``Decision``: what one prediction answered, where the answer came from, and what it cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.costs import CostBreakdown

Source = Literal["local", "cloud", "degraded"]


@dataclass(slots=True, eq=False)
class Decision:
    """One answer of the edge runtime.

    ``source`` is ``local`` (the policy stopped at a node), ``cloud`` (the HPC answered in
    time) or ``degraded`` (the policy escalated but no cloud answer came — uplink down, deadline
    missed, error reply — or a sensor fault left no action the policy could take; the answer is
    the local classifier's at the node reached). ``error`` says why a decision was degraded.
    ``bundle_id``: the bundle that answered (the one that walked the policy and escalated).
    ``timings`` are seconds in the runtime's clock: ``total``, ``local`` and ``cloud``.

    A regression bundle's decision answers ``value`` (the stop node's, the HPC's when it
    answered in time, else the node reached's, flagged ``degraded``) with ``label`` "",
    ``label_index`` -1 and empty ``probabilities``; ``value`` is None for classification.
    """

    label: str
    label_index: int
    probabilities: npt.NDArray[np.float32]
    source: Source
    sensors_read: tuple[str, ...]
    failed_sensors: dict[str, str]
    nodes: tuple[str, ...]
    escalated: bool
    cost: CostBreakdown
    request_id: int | None
    timings: dict[str, float]
    error: str | None = None
    bundle_id: str | None = None
    value: float | None = None
