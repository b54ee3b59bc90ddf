"""Summaries of a run: accuracy (a regression run: its errors), sources, costs in real units
(via ``EnergyModel``), latency."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.simulator.energy import EnergyModel
from adaptedge.simulator.records import RunResult


@dataclass(frozen=True)
class CostTotals:
    """Mean cost per decision, split by sensors / link / cloud, in real units."""

    sensor_energy_mj: float
    sensor_latency_ms: float
    sensor_money: float
    link_energy_mj: float
    link_bytes: float
    cloud_calls: float
    cloud_money: float
    idle_energy_mj: float
    scalar: float

    @property
    def energy_mj(self) -> float:
        return self.sensor_energy_mj + self.link_energy_mj + self.idle_energy_mj

    @property
    def money(self) -> float:
        return self.sensor_money + self.cloud_money

    def to_dict(self) -> dict[str, float]:
        out = asdict(self)
        out["energy_mj"] = self.energy_mj
        out["money"] = self.money
        return out


def per_decision_energy(run: RunResult, energy: EnergyModel) -> npt.NDArray[np.float64]:
    """Sensor + link energy (mJ) of each decision (idle excluded)."""
    c = run.columns
    return np.asarray([energy.cost(s, e).energy_mj for s, e in zip(c.sensors, c.sent,
                                                                    strict=True)])


def cost_totals(run: RunResult, energy: EnergyModel) -> CostTotals:
    c = run.columns
    n = max(run.n, 1)
    acc = np.zeros(8)
    for s, e in zip(c.sensors, c.sent, strict=True):
        d = energy.cost(s, e)
        acc += (d.sensor_energy_mj, d.sensor_latency_ms, d.sensor_money, d.link_energy_mj,
                d.link_bytes, d.cloud_calls, d.cloud_money, d.scalar)
    acc /= n
    devices = max(len(set(c.device)), 1)
    idle = energy.idle_mj(run.duration_s) * devices / n
    v = acc.tolist()
    return CostTotals(sensor_energy_mj=v[0], sensor_latency_ms=v[1], sensor_money=v[2],
                      link_energy_mj=v[3], link_bytes=v[4], cloud_calls=v[5], cloud_money=v[6],
                      idle_energy_mj=idle, scalar=v[7])


def latency_percentiles(run: RunResult) -> dict[str, float]:
    lat = np.asarray(run.columns.latency_ms, dtype=float)
    if not lat.size:
        return {"p50": float("nan"), "p90": float("nan"), "p99": float("nan"),
                "max": float("nan")}
    p50, p90, p99 = np.percentile(lat, [50, 90, 99]).tolist()
    return {"p50": p50, "p90": p90, "p99": p99, "max": float(lat.max())}


def summarize(run: RunResult, energy: EnergyModel) -> dict[str, Any]:
    """The numbers a report shows for one run (a regression run: also its ``mse``, ``mae``
    and ``rmse`` in the target's unit; its ``accuracy`` is NaN)."""
    devices = sorted(set(run.columns.device))
    return {
        "mode": run.mode,
        "bundle_id": run.bundle_id,
        "operating_point": run.operating_point,
        "decisions": run.n,
        "devices": len(devices),
        "accuracy": run.accuracy(),
        "escalation_rate": run.escalation_rate(),
        "sent_rate": run.sent_rate(),
        "source_rates": {s: run.rate(s) for s in ("local", "cloud", "degraded")},
        "cost_per_decision": cost_totals(run, energy).to_dict(),
        "latency_ms": latency_percentiles(run),
        "duration_s": run.duration_s,
        "wall_s": run.wall_s,
        "outages": [list(o) for o in run.outages],
        **({"extra": run.extra} if run.extra else {}),
        **(run.errors() if run.regression else {}),
    }


def rates_over_time(run: RunResult, bins: int = 50) -> dict[str, list[float]]:
    """Escalation and degraded rates per time bin (bin centres in seconds from the start)."""
    t = np.asarray(run.columns.t_start, dtype=float)
    if not t.size:
        return {"t": [], "escalation": [], "degraded": [], "count": []}
    hi = max(float(t.max()), 1e-9)
    edges = np.linspace(0.0, hi * (1 + 1e-9), bins + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    count = np.bincount(idx, minlength=bins).astype(float)
    esc = np.bincount(idx, weights=np.asarray(run.columns.escalated, float), minlength=bins)
    deg = np.bincount(idx, weights=(run.sources() == "degraded").astype(float), minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"t": ((edges[:-1] + edges[1:]) / 2).tolist(),
                "escalation": np.where(count > 0, esc / count, np.nan).tolist(),
                "degraded": np.where(count > 0, deg / count, np.nan).tolist(),
                "count": count.tolist()}
