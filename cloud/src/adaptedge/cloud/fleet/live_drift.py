"""Live drift alarms in ``cloud serve --db``: the store ingest feeds ``cloud.drift``.

Per bundle, a ``FleetDriftMonitor`` (one ``DriftMonitor`` per device and operating point).
Each newly stored, labelled ``audit`` row is one agreement observation (did the local answer
equal the HPC's?) at the operating point it was made at. Escalation rate: each device
telemetry message carries cumulative ``decisions`` and ``escalations``; the increase since the
device's previous message is observed (``observe_counts``) at the operating point of the
device's latest record (before any record, nothing is observed; a counter that went down is a
restarted device, counted from 0). Every alarm is logged (by ``cloud.drift``) and stored in the
fleet store's ``alarms`` table (metric ``<stream>_<direction>``, e.g. ``agreement_down``), where
``fleet status`` and the Prometheus counter ``adaptedge_drift_alarms_total`` see it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from adaptedge.cloud.fleet.drift import DriftAlarm, DriftDesign, FleetDriftMonitor
from adaptedge.cloud.fleet.store import FleetStore
from adaptedge.protocol.manifest import Manifest


class LiveDrift:
    """Drift monitors fed by the ingest; ``manifest_of(bundle_id)`` gives a bundle's manifest
    (None: not served here, not monitored)."""

    def __init__(self, store: FleetStore, manifest_of: Callable[[str], Manifest | None],
                 design: DriftDesign | None = None) -> None:
        self.store = store
        self.manifest_of = manifest_of
        self.design = design or DriftDesign()
        self._monitors: dict[str, FleetDriftMonitor | None] = {}
        self._where: dict[str, tuple[str, int]] = {}  # device -> (bundle, point) of its latest
        self._counts: dict[str, tuple[float, float]] = {}  # device -> (decisions, escalations)
        self.alarms = 0

    def _monitor(self, bundle_id: str) -> FleetDriftMonitor | None:
        if bundle_id not in self._monitors:
            manifest = self.manifest_of(bundle_id)
            self._monitors[bundle_id] = None if manifest is None else \
                FleetDriftMonitor(manifest, self.design)
        return self._monitors[bundle_id]

    def _point_name(self, bundle_id: str, point: int | None) -> str | None:
        monitor = self._monitor(bundle_id)
        if monitor is None or point is None:
            return None
        points = monitor.manifest.operating_points
        return points[point].name if 0 <= point < len(points) else None

    def on_record(self, device: str, bundle_id: str, kind: str, point: int | None,
                  local_label: int | None, hpc_label: int | None) -> None:
        """A newly stored record (call once per new row, in arrival order)."""
        name = self._point_name(bundle_id, point)
        if name is None:
            return
        self._where[device] = (bundle_id, point)  # type: ignore[assignment]
        if kind != "audit" or hpc_label is None or local_label is None:
            return
        monitor = self._monitor(bundle_id)
        assert monitor is not None
        alarm = monitor.observe_audit(device, name, local_label == hpc_label)
        if alarm is not None:
            self._store(alarm, bundle_id, point)

    def on_telemetry(self, device: str, counters: Mapping[str, float]) -> None:
        """A device's telemetry: the decisions and escalations since its previous message."""
        decisions = float(counters.get("decisions") or 0.0)
        escalations = float(counters.get("escalations") or 0.0)
        before = self._counts.get(device, (0.0, 0.0))
        if decisions < before[0] or escalations < before[1]:
            before = (0.0, 0.0)  # restarted
        self._counts[device] = (decisions, escalations)
        where = self._where.get(device)
        d, e = int(decisions - before[0]), int(escalations - before[1])
        if where is None or d <= 0 or not 0 <= e <= d:
            return
        bundle_id, point = where
        monitor, name = self._monitor(bundle_id), self._point_name(bundle_id, point)
        if monitor is None or name is None:
            return
        for alarm in monitor.monitor(device, name).observe_counts(d, e):
            self._store(alarm, bundle_id, point)

    def _store(self, alarm: DriftAlarm, bundle_id: str, point: int | None) -> None:
        self.alarms += 1
        self.store.add_alarm(alarm.device, bundle_id, point,
                             f"{alarm.stream}_{alarm.direction}", alarm.message(), time.time())
