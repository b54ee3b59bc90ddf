"""Audit sampling on the device: a seeded fraction of local decisions also get an HPC label.

For a decision the walk answered locally (it stopped), ``protocol.audit.AuditPolicy`` picks by
(seed, device, decision index) whether to audit it. An audit reads the sensors the HPC needs
that the walk did not read, and keeps the row (the local answer, the operating point's index,
kind ``audit``, the audit fraction at that point: the row's weight in recalibration) in the
outbox, whence ``edge.drain`` forwards it for labelling. The decision
itself is unchanged (same answer, same cost): what the audit costs (its extra sensors and one
link trip) is counted on its own, in the ``audit_*`` counters. The decision index counts every
decision of the runtime since it was loaded, from 0 (the batched replay counts the same way).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from adaptedge.edge.outbox import Outbox, keep_escalation
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.protocol.costs import CostBreakdown, decision_cost
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.messages import InferenceRequest
from adaptedge.protocol.walk import ReadSensor, Trail

F32 = npt.NDArray[np.float32]
MakeRequest = Callable[[F32, int, int, float], InferenceRequest]


class Auditor:
    """Audits the local decisions of one runtime (not thread-safe: one per runtime)."""

    def __init__(self, manifest: Manifest, policy: AuditPolicy, device_id: str,
                 hpc_sensors: tuple[int, ...], counters: dict[str, float]) -> None:
        self.manifest = manifest
        self.policy = policy
        self.device_id = device_id
        self.hpc_sensors = hpc_sensors
        self._names = tuple(s.name for s in manifest.sensors)
        self._counters = counters
        self._regression = manifest.is_regression
        """A regression device's record carries its own value (``local[0]``)."""
        self._extra: dict[tuple[int, int], CostBreakdown] = {}

    def maybe_audit(self, index: int, point: int, values: F32, trail: Trail,
                    read: ReadSensor | None, local: F32, outbox: Outbox | None,
                    make_request: MakeRequest) -> bool:
        """Audit local decision number ``index`` if the policy picks it; True if kept."""
        if outbox is None or not self.policy.selected(self.device_id, index, point):
            return False
        audit_trail = Trail(self._names)
        audit_trail.read_bits, audit_trail.failed_bits = trail.read_bits, trail.failed_bits
        counters = self._counters
        read_all = audit_trail.read(self.hpc_sensors, read, stop_at_failure=False)
        self._charge(trail.read_bits, audit_trail.read_bits | audit_trail.failed_bits)
        if not read_all:  # the HPC could not label it: nothing to keep
            counters["audit_sensor_failures"] += 1
            return False
        label = int(local.argmax())
        request = make_request(values, audit_trail.read_bits, label, float(local[label]))
        errors = counters.get("outbox_errors", 0.0)
        keep_escalation(outbox, request, counters, "audit", point,
                        self.policy.fraction_at(point),
                        float(local[0]) if self._regression else None)
        if counters.get("outbox_errors", 0.0) > errors:
            return False
        counters["audits"] += 1
        return True

    def _charge(self, before: int, after: int) -> None:
        """Count the sensors the audit read on top of the decision's, and the link."""
        extra = self._extra.get((before, after))
        if extra is None:
            names = [n for i, n in enumerate(self._names) if after >> i & 1]
            base = [n for i, n in enumerate(self._names) if before >> i & 1]
            full, own = decision_cost(self.manifest, names, True), \
                decision_cost(self.manifest, base, False)
            extra = CostBreakdown(full.energy_mj - own.energy_mj,
                                  full.latency_ms - own.latency_ms, full.money - own.money,
                                  full.bytes - own.bytes, full.scalar - own.scalar)
            if len(self._extra) < 4096:
                self._extra[(before, after)] = extra
        counters = self._counters
        counters["audit_energy_mj"] += extra.energy_mj
        counters["audit_latency_ms"] += extra.latency_ms
        counters["audit_money"] += extra.money
        counters["audit_bytes"] += extra.bytes
        counters["audit_cost"] += extra.scalar
