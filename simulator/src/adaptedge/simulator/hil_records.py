"""Reading the devices' decision records back after a HIL run: one time origin for every
device (from the monitor's request arrivals), each decision's start rebuilt from the pacing,
and the outages shifted onto that origin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.simulator.monitor import RequestMonitor
from adaptedge.simulator.network import Outage
from adaptedge.simulator.records import DecisionColumns


def collect_decisions(outputs: dict[str, Path], monitor: RequestMonitor,
                      truth: npt.NDArray[Any], rate_hz: float, sensor_ms: dict[str, float],
                      outages: tuple[Outage, ...], schedule_t0: list[float],
                      regression: bool = False
                      ) -> tuple[DecisionColumns, float, list[tuple[float, float]]]:
    """Every device's records (``outputs``: device -> its ``--json-out`` file) as columns,
    the wall time taken as the run's origin, and the outages relative to that origin (none
    when the outage schedule never started: ``schedule_t0`` empty). ``regression``: each
    record's ``value`` against ``truth``, the targets (``DecisionColumns.value``, ``target``)."""
    records = {name: read_records(path) for name, path in outputs.items()}
    starts = {name: _device_start(monitor, name, recs, rate_hz) for name, recs in records.items()}
    t_origin = min([v for v in starts.values() if v == v] + schedule_t0, default=0.0)
    cols = DecisionColumns()
    for name, recs in records.items():
        offset = starts[name] - t_origin if starts[name] == starts[name] else 0.0
        _append_records(cols, name, recs, truth, rate_hz, offset, sensor_ms, regression)
    if not schedule_t0:
        return cols, t_origin, []
    shift = schedule_t0[0] - t_origin
    return cols, t_origin, [(o.start_s + shift, o.end_s + shift) for o in outages]


def _device_start(monitor: RequestMonitor, device: str, records: list[dict[str, Any]],
                  rate_hz: float) -> float:
    """Wall time a device started deciding: min over its requests of arrival - row / rate."""
    best = float("nan")
    for i, r in enumerate(records):
        rid = r.get("request_id")
        if rid is None:
            continue
        at = monitor.arrival(device, int(rid))
        if at is None:
            continue
        start = at - int(r.get("index", i)) / rate_hz
        if not best <= start:
            best = start
    return best


def read_records(path: Path) -> list[dict[str, Any]]:
    """Per-decision records of ``adaptedge edge run --json-out`` (``{"summary", "decisions"}``;
    a plain array or JSON lines are accepted too)."""
    text = path.read_text() if path.exists() else ""
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError:
            loaded = None
        if isinstance(loaded, dict):
            loaded = loaded.get("decisions", [])
        if isinstance(loaded, list):
            return [r for r in loaded if isinstance(r, dict)]
    records = []
    for line in text.splitlines():
        line = line.strip()
        if line:
            obj = json.loads(line)
            if isinstance(obj, dict) and "source" in obj:
                records.append(obj)
    return records


def _append_records(cols: DecisionColumns, device: str, records: list[dict[str, Any]],
                    truth: npt.NDArray[Any], rate_hz: float, offset_s: float,
                    sensor_ms: dict[str, float], regression: bool = False) -> None:
    """Add a device's records. The device starts row i at ``row / rate`` or when the previous
    decision finished, whichever is later (``edge run --rate`` paces that way), so each
    decision's start is rebuilt from the latencies, plus the device's offset from the origin.
    Replayed sensors answer from memory, so each decision's latency gets the bundle's nominal
    latency of the sensors it read, as in replay."""
    truth_list = np.asarray(truth).tolist()
    free_at = 0.0
    for i, r in enumerate(records):
        row = int(r.get("index", r.get("row", i)))
        latency = r.get("latency_ms")
        cols.device.append(device)
        cols.row.append(row)
        begin = max(row / rate_hz, free_at)
        if latency is not None and latency == latency:
            free_at = begin + float(latency) / 1000.0
        cols.t_start.append(offset_s + begin)
        sensors = tuple(r.get("sensors", r.get("sensors_read", ())))
        nominal = sum(sensor_ms.get(s, 0.0) for s in sensors)
        cols.latency_ms.append(float("nan") if latency is None else float(latency) + nominal)
        cols.label.append(int(r["label_index"]))
        if regression:
            value = r.get("value")
            cols.value.append(float("nan") if value is None else float(value))
            cols.target.append(float(truth_list[row]))
        cols.truth.append(-1 if regression else int(truth_list[row]))
        cols.source.append(str(r["source"]))
        cols.escalated.append(bool(r.get("escalated", False)))
        cols.sensors.append(sensors)
        rid = r.get("request_id")
        cols.request_id.append(-1 if rid is None else int(rid))
        cols.sent.append(rid is not None)
        cols.energy_mj.append(float((r.get("cost") or {}).get("energy_mj", float("nan"))))
