"""Drift alarms: does a device still escalate and agree with the HPC as validation promised?

Per device and operating point, ``DriftMonitor`` runs three Bernoulli CUSUM charts:

* escalation rate up and escalation rate down (one observation per decision),
* audited agreement down (one observation per audit: did the local answer equal the HPC's?).

Each chart is the log-likelihood-ratio CUSUM ``S_n = max(0, S_{n-1} + llr(x_n))`` of an
in-control rate ``p0`` against a shifted rate ``p1`` whose odds are ``odds_ratio`` times (up) or
``1 / odds_ratio`` times (down) those of ``p0``, and alarms when ``S_n >= h``.

**The in-control rate is the far end of the validation interval**, not the point estimate:
the bundle's figure was measured on ``n`` validation rows, so ``p0`` is the upper (for an up
chart) or lower (down chart) end of the two-sided Wilson interval at ``reference_confidence``
(default 99%). Any live rate inside that interval is "no drift".

**Designed false-alarm rate.** For a live rate on the in-control side of ``p0`` the likelihood
ratio started at any decision k is a non-negative supermartingale, so by Ville's inequality it
ever reaches ``e^h`` with probability at most ``e^-h``. A CUSUM alarm within the first N
observations means one of the N ratios started at k = 1..N did, hence
``P(false alarm within N) <= N e^-h``. With ``charts`` charts, ``h = ln(charts * horizon /
false_alarm)`` bounds the probability of any false alarm within ``horizon`` decisions by
``false_alarm`` (default: 1% within 100,000 decisions; the bound is conservative, measured
rates are lower: docs/fleet-drift.md). The bound holds when the live rate is inside the
validation interval; the interval itself misses the true rate with probability at most
``1 - reference_confidence`` per figure.

After an alarm the chart restarts from 0 (so a persisting drift alarms again, one per
``h``-worth of evidence). Plain Python: the cloud never imports scikit-learn or scipy.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Literal

from adaptedge.protocol.drift_reference import Reference, reference_from_manifest
from adaptedge.protocol.manifest import Manifest

log = logging.getLogger("adaptedge.cloud.fleet.drift")

Stream = Literal["escalation", "agreement"]
Direction = Literal["up", "down"]
_Z99 = 2.5758293035489004  # standard normal quantile at 0.995


@dataclass(frozen=True, slots=True)
class DriftDesign:
    """What the charts are tuned for: at most ``false_alarm`` probability of any false alarm
    within ``horizon`` decisions; each chart detects an odds shift of ``odds_ratio``."""

    false_alarm: float = 0.01
    horizon: int = 100_000
    odds_ratio: float = 2.0
    reference_confidence: float = 0.99

    def __post_init__(self) -> None:
        if not 0.0 < self.false_alarm < 1.0:
            raise ValueError(f"false_alarm must be in (0, 1), got {self.false_alarm!r}")
        if self.horizon < 1:
            raise ValueError(f"horizon must be >= 1 decision, got {self.horizon!r}")
        if not self.odds_ratio > 1.0:
            raise ValueError(f"odds_ratio must be > 1, got {self.odds_ratio!r}")
        if not 0.0 < self.reference_confidence < 1.0:
            raise ValueError("reference_confidence must be in (0, 1), got "
                             f"{self.reference_confidence!r}")

    def threshold(self, charts: int) -> float:
        """``h = ln(charts * horizon / false_alarm)``: the union bound over charts and starts."""
        return math.log(max(charts, 1) * self.horizon / self.false_alarm)


@dataclass(frozen=True, slots=True)
class DriftAlarm:
    """A chart crossed its threshold: what, where, when, and the evidence."""

    device: str
    point: str
    stream: Stream
    direction: Direction
    decision: int
    """Decisions observed by the monitor when it fired (1-based count)."""
    audits: int
    expected: float
    """The validation figure (point estimate)."""
    in_control: float
    """``p0``: the far end of its validation interval."""
    observed: float
    """The rate since the chart last left zero (the CUSUM's change-point estimate)."""
    n_observed: int
    statistic: float
    threshold: float

    def message(self) -> str:
        return (f"drift alarm: device {self.device} point {self.point}: {self.stream} "
                f"{self.direction}: {self.observed:.3f} over the last {self.n_observed} "
                f"observations vs {self.expected:.3f} on validation (in-control bound "
                f"{self.in_control:.3f}); CUSUM {self.statistic:.2f} >= {self.threshold:.2f} "
                f"at decision {self.decision}")

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def wilson_bounds(rate: float, n: int | None, confidence: float) -> tuple[float, float]:
    """Two-sided Wilson interval of ``rate`` measured on ``n`` rows (exact when ``n`` is None)."""
    p = min(max(float(rate), 0.0), 1.0)
    if n is None:
        return p, p
    if n <= 0:
        return 0.0, 1.0
    z = _Z99 if confidence == 0.99 else _normal_quantile(0.5 + confidence / 2)
    z2 = z * z / n
    centre = (p + z2 / 2) / (1 + z2)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n)) / (1 + z2)
    return max(0.0, centre - half), min(1.0, centre + half)


def _normal_quantile(q: float) -> float:
    """Standard normal quantile by bisection on erf (no scipy in the cloud)."""
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


class BernoulliCusum:
    """One-sided CUSUM of Bernoulli observations: ``p0`` in control against ``p1``."""

    def __init__(self, p0: float, p1: float, threshold: float) -> None:
        if not (0.0 < p0 < 1.0 and 0.0 < p1 < 1.0 and p0 != p1):
            raise ValueError(f"need 0 < p0, p1 < 1 and p0 != p1, got {p0!r}, {p1!r}")
        self.p0, self.p1, self.threshold = p0, p1, threshold
        self._hit = math.log(p1 / p0)
        self._miss = math.log((1 - p1) / (1 - p0))
        self.statistic = 0.0
        self.n_since = 0  # observations since the statistic last was 0
        self.k_since = 0  # of which positive

    def observe(self, x: bool) -> bool:
        """Add one observation; True when the chart alarms (it then restarts from 0)."""
        self.statistic = max(0.0, self.statistic + (self._hit if x else self._miss))
        if self.statistic == 0.0:
            self.n_since = self.k_since = 0
            return False
        self.n_since += 1
        self.k_since += int(x)
        return self.statistic >= self.threshold

    def reset(self) -> None:
        self.statistic = 0.0
        self.n_since = self.k_since = 0


def shifted(p0: float, odds_ratio: float) -> float:
    """The rate whose odds are ``odds_ratio`` times those of ``p0``."""
    odds = p0 / (1 - p0) * odds_ratio
    return odds / (1 + odds)


_FLOOR = 1e-4  # rates are kept in [_FLOOR, 1 - _FLOOR]: an exact 0 would make one event infinite


class DriftMonitor:
    """The drift charts of one device at one operating point.

    ``observe_decision(escalated)`` once per decision, ``observe_audit(agree)`` once per
    audited local decision (did the local answer equal the HPC's); each returns a
    ``DriftAlarm`` (also logged as a warning) when a chart fires, else ``None``."""

    def __init__(self, reference: Reference, design: DriftDesign | None = None, *,
                 device: str = "", point: str = "") -> None:
        self.reference = reference
        self.design = design or DriftDesign()
        self.device, self.point = device, point
        conf, odds = self.design.reference_confidence, self.design.odds_ratio
        e_low, e_high = wilson_bounds(reference.escalation_rate, reference.n_rows, conf)
        planned: dict[tuple[Stream, Direction], tuple[float, float]] = {}
        if e_high < 1.0 - _FLOOR:
            p0 = max(e_high, _FLOOR)
            planned["escalation", "up"] = (p0, shifted(p0, odds))
        if e_low > _FLOOR:
            planned["escalation", "down"] = (e_low, shifted(e_low, 1.0 / odds))
        if reference.local_agreement is not None:
            a_low = wilson_bounds(reference.local_agreement, reference.n_local, conf)[0]
            if a_low > _FLOOR:
                p0 = min(a_low, 1.0 - _FLOOR)
                planned["agreement", "down"] = (p0, shifted(p0, 1.0 / odds))
        self.threshold = self.design.threshold(len(planned))
        self.charts = {key: BernoulliCusum(p0, p1, self.threshold)
                       for key, (p0, p1) in planned.items()}
        self.decisions = 0
        self.audits = 0
        self.alarms: list[DriftAlarm] = []

    def observe_decision(self, escalated: bool) -> DriftAlarm | None:
        self.decisions += 1
        fired = None
        for direction in ("up", "down"):
            alarm = self._observe("escalation", direction, bool(escalated))
            fired = fired or alarm
        return fired

    def observe_counts(self, decisions: int, escalated: int) -> list[DriftAlarm]:
        """Counters from a device's telemetry (``decisions`` since its last report, of which
        ``escalated``): the cloud does not see local decisions one by one, so the escalations
        are spread evenly over the report. The likelihood ratio over the whole report does not
        depend on that order; only where inside it an alarm fires does."""
        if not 0 <= escalated <= decisions:
            raise ValueError(f"need 0 <= escalated <= decisions, got {escalated} of {decisions}")
        alarms = []
        for i in range(decisions):
            alarm = self.observe_decision((i + 1) * escalated // decisions
                                          > i * escalated // decisions)
            if alarm is not None:
                alarms.append(alarm)
        return alarms

    def observe_audit(self, agree: bool) -> DriftAlarm | None:
        self.audits += 1
        return self._observe("agreement", "down", bool(agree))

    def _observe(self, stream: Stream, direction: Direction, x: bool) -> DriftAlarm | None:
        chart = self.charts.get((stream, direction))
        if chart is None or not chart.observe(x):
            return None
        expected = (self.reference.escalation_rate if stream == "escalation"
                    else float(self.reference.local_agreement or 0.0))
        alarm = DriftAlarm(
            device=self.device, point=self.point, stream=stream, direction=direction,
            decision=self.decisions, audits=self.audits, expected=expected,
            in_control=chart.p0, observed=chart.k_since / max(chart.n_since, 1),
            n_observed=chart.n_since, statistic=chart.statistic, threshold=chart.threshold)
        chart.reset()
        self.alarms.append(alarm)
        log.warning("%s", alarm.message())
        return alarm


class FleetDriftMonitor:
    """One ``DriftMonitor`` per (device, operating point), created on first sight from the
    bundle's figures (``reference_from_manifest``)."""

    def __init__(self, manifest: Manifest, design: DriftDesign | None = None) -> None:
        self.manifest = manifest
        self.design = design or DriftDesign()
        self.monitors: dict[tuple[str, str], DriftMonitor] = {}

    def monitor(self, device: str, point: str) -> DriftMonitor:
        key = (device, point)
        if key not in self.monitors:
            self.monitors[key] = DriftMonitor(reference_from_manifest(self.manifest, point),
                                              self.design, device=device, point=point)
        return self.monitors[key]

    def observe_decision(self, device: str, point: str, escalated: bool) -> DriftAlarm | None:
        return self.monitor(device, point).observe_decision(escalated)

    def observe_audit(self, device: str, point: str, agree: bool) -> DriftAlarm | None:
        return self.monitor(device, point).observe_audit(agree)
