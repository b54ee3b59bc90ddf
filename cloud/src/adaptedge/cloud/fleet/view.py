"""What ``adaptedge fleet status`` and ``fleet report`` show, computed from the fleet store.

Per device: records stored (escalated and audited), the audited agreement of the local
answers with the HPC (labelled audits only: an unbiased sample of the local decisions) with
its 95% Wilson interval, the escalation rate and outbox backlog of the latest telemetry, the
alarms raised and the records refused over the device's row quota (``fleet.store.quota``);
a regression device's audits: the MSE and MAE of its values against the HPC's, in the
target's unit (``audit_mse``, ``audit_mae``, ``audits_valued``).
Over time: agreement per window of consecutive audits, escalation rate between consecutive
telemetry messages (a counter that went down is a restarted device: its window starts at 0).
The bundle's validation expectation is what the drift monitor compares with
(``protocol.drift_reference``): ``metadata["drift_reference"]`` per operating point when the
bundle carries it, else the point's escalation rate alone.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from adaptedge.cloud.fleet.store import FleetStore
from adaptedge.protocol.drift_reference import reference_from_manifest
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.operating_points import wilson_interval


@dataclass(frozen=True, slots=True)
class Series:
    """One metric of one device over time: window end times, estimates, 95% bands, sizes."""

    device: str
    t: tuple[float, ...]
    value: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    n: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Expectation:
    """The validation figure of a metric, its 95% band (None when the size is unknown)."""

    value: float
    low: float | None
    high: float | None


def device_status(store: FleetStore) -> list[dict[str, Any]]:
    """One object per device (sorted by device id)."""
    devices: dict[str, dict[str, Any]] = {}

    def entry(device: str) -> dict[str, Any]:
        return devices.setdefault(device, {
            "device": device, "bundles": [], "records_stored": 0, "escalated": 0, "audits": 0,
            "audits_labelled": 0, "agreement": None, "agreement_low": None,
            "agreement_high": None, "decisions": None, "escalation_rate": None,
            "degraded_rate": None, "audit_cost": None, "outbox_records": None,
            "drain_in_flight": None, "alarms": 0, "last_seen": None, "quota_refused": 0,
            "quota_refused_at": None})

    agree: Counter[str] = Counter()
    for device, bundle, kind, n, labelled, same in store.tallies():
        e = entry(device)
        if bundle not in e["bundles"]:
            e["bundles"].append(bundle)
        e["records_stored"] += n
        e["escalated" if kind == "escalated" else "audits"] += n
        if kind == "audit":
            e["audits_labelled"] += labelled
            agree[device] += same
    latest: dict[str, tuple[float, dict[str, Any]]] = {}
    for device, at, counters in store.telemetry():
        latest[device] = (at, counters)
    for device, (at, counters) in latest.items():
        e = entry(device)
        e["last_seen"] = at
        decisions = counters.get("decisions") or 0.0
        e["decisions"] = decisions
        if decisions:
            e["escalation_rate"] = (counters.get("escalations") or 0.0) / decisions
            e["degraded_rate"] = (counters.get("decisions_degraded") or 0.0) / decisions
        e["audit_cost"] = counters.get("audit_cost")
        e["outbox_records"] = counters.get("outbox_records")  # backlog (edge.drain), if draining
        e["drain_in_flight"] = counters.get("drain_in_flight")
    for alarm in store.alarms():
        entry(alarm.device)["alarms"] += 1
    for device, (refused, refused_at) in store.quota_refusals().items():
        entry(device).update(quota_refused=refused, quota_refused_at=refused_at)
    for device, e in devices.items():
        n = e["audits_labelled"]
        if n:
            e["agreement"] = agree[device] / n
            e["agreement_low"], e["agreement_high"] = wilson_interval(e["agreement"], n)
    _audit_errors(store, entry)
    return [devices[d] for d in sorted(devices)]


def _audit_errors(store: FleetStore, entry: Callable[[str], dict[str, Any]]) -> None:
    """A regression device's audits: its values against the HPC's, ``audit_mse`` (the
    target's unit squared) and ``audit_mae`` (its unit) over ``audits_valued`` audits (keys
    only on devices with such audits; a classification device's object is as before)."""
    for device, _, kind, n, squared, absolute in store.value_tallies():
        if kind != "audit" or not n:
            continue
        e = entry(device)
        k = e.get("audits_valued", 0)
        e["audit_mse"] = (e.get("audit_mse", 0.0) * k + squared) / (k + n)
        e["audit_mae"] = (e.get("audit_mae", 0.0) * k + absolute) / (k + n)
        e["audits_valued"] = k + n


def agreement_series(store: FleetStore, window: int) -> list[Series]:
    """Audited agreement per ``window`` consecutive labelled audits, per device."""
    by_device: dict[str, list[tuple[float, bool]]] = {}
    for row in store.labelled_rows():
        if row.kind == "audit":
            by_device.setdefault(row.device, []).append(
                (row.received_at, row.local_label == row.hpc_label))
    out = []
    for device, rows in sorted(by_device.items()):
        windows = (rows[start:start + window] for start in range(0, len(rows), window))
        out.append(_series(device, [(chunk[-1][0], sum(same for _, same in chunk) / len(chunk),
                                     len(chunk)) for chunk in windows]))
    return out


def escalation_series(store: FleetStore) -> list[Series]:
    """Escalation rate between consecutive telemetry messages, per device."""
    by_device: dict[str, list[tuple[float, float, float]]] = {}
    for device, at, counters in store.telemetry():
        by_device.setdefault(device, []).append(
            (at, counters.get("decisions") or 0.0, counters.get("escalations") or 0.0))
    out = []
    for device, samples in sorted(by_device.items()):
        points: list[tuple[float, float, int]] = []
        prev_d = prev_e = 0.0
        for at, d, e in samples:
            if d < prev_d or e < prev_e:  # a restarted device counts from 0 again
                prev_d = prev_e = 0.0
            dn, en = d - prev_d, e - prev_e
            prev_d, prev_e = d, e
            if dn > 0:
                points.append((at, en / dn, int(dn)))
        out.append(_series(device, points))
    return out


def _series(device: str, points: Sequence[tuple[float, float, int]]) -> Series:
    """A ``Series`` from (window end, estimate, rows) points, with 95% Wilson bands."""
    bands = [wilson_interval(p, n) for _, p, n in points]
    return Series(device, tuple(t for t, _, _ in points), tuple(p for _, p, _ in points),
                  tuple(lo for lo, _ in bands), tuple(hi for _, hi in bands),
                  tuple(n for _, _, n in points))


def main_point(store: FleetStore, device: str, bundle_id: str | None = None) -> int | None:
    """The operating point index a device runs now: that of its latest record (of
    ``bundle_id`` when given) made at a known point. Not the most common over its history:
    an earlier run at the default point would hide a later one at ``--budget B``'s point."""
    points = [r["point"] for r in store.record_summaries()
              if r["device"] == device and r["point"] is not None
              and (bundle_id is None or r["bundle_id"] == bundle_id)]
    return points[-1] if points else None


def expectations(manifest: Manifest, point: int | None) -> dict[str, Expectation]:
    """``escalation_rate`` and (when the bundle has it) ``agreement`` on validation, of the
    operating point at index ``point`` (the default point when unknown), from
    ``protocol.drift_reference`` (the figures the drift monitor compares with)."""
    if point is None or not 0 <= point < len(manifest.operating_points):
        name = manifest.default_operating_point
    else:
        name = manifest.operating_points[point].name
    ref = reference_from_manifest(manifest, name)
    out = {"escalation_rate": _expect(ref.escalation_rate, ref.n_rows or 0)}
    if ref.local_agreement is not None:
        out["agreement"] = _expect(ref.local_agreement, ref.n_local or 0)
    return out


def _expect(value: float, rows: int) -> Expectation:
    if rows <= 0 or not math.isfinite(value):
        return Expectation(value, None, None)
    low, high = wilson_interval(value, rows)
    return Expectation(value, low, high)
