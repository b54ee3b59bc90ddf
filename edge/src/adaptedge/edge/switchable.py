"""``SwitchableRuntime``: one runtime answering at a time, swapped between two decisions.

A decision runs under a lock and a swap takes the same lock, so each decision is answered by
exactly one bundle (``Decision.bundle_id`` says which) and none is lost or split across a swap.
A swapped-in bundle is on probation: over its first ``decisions`` decisions, once at least
``min_decisions`` were made, a share of degraded decisions above ``max_degraded_rate`` swaps the
previous runtime back at once, and a decision whose walk raises on the new bundle rolls back and
is answered again by the previous one. The previous runtime stays loaded until the verdict;
``on_verdict`` then receives it (the caller closes the runtime it no longer needs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy.typing as npt

from adaptedge.edge.decision import Decision
from adaptedge.edge.runtime import EdgeRuntime
from adaptedge.edge.sensors import Reader
from adaptedge.protocol.manifest import Manifest


@dataclass(frozen=True, slots=True)
class Probation:
    decisions: int = 200
    min_decisions: int = 20
    max_degraded_rate: float = 0.2


@dataclass(frozen=True, slots=True)
class Verdict:
    """How a probation ended. ``kept``: the new bundle stays; else ``reason`` says why not.
    ``retired`` is the runtime no longer answering (to be closed by the receiver)."""

    kept: bool
    bundle_id: str
    version: int
    reason: str
    retired: EdgeRuntime
    decisions: int
    degraded: int


class _Trial:
    __slots__ = ("decisions", "degraded", "previous", "previous_version", "probation")

    def __init__(self, previous: EdgeRuntime, previous_version: int, probation: Probation) -> None:
        self.previous, self.previous_version, self.probation = previous, previous_version, probation
        self.decisions = 0
        self.degraded = 0


class SwitchableRuntime:
    """Duck-types the parts of ``EdgeRuntime`` a device loop uses (``predict``,
    ``predict_row``, ``manifest``, ``operating_point``, ``counters``, ``close``)."""

    def __init__(self, runtime: EdgeRuntime, version: int,
                 on_verdict: Callable[[Verdict], None] | None = None) -> None:
        self._rt = runtime
        self.version = version
        self.on_verdict = on_verdict
        self._lock = threading.Lock()
        self._trial: _Trial | None = None
        self._retired: dict[str, float] = {}
        self.update_counters = {"updates_applied": 0.0, "updates_kept": 0.0, "rollbacks": 0.0}
        self.on_close: list[Callable[[], None]] = []

    # -- what answers now --------------------------------------------------------------------
    @property
    def runtime(self) -> EdgeRuntime:
        return self._rt

    @property
    def manifest(self) -> Manifest:
        return self._rt.manifest

    @property
    def bundle_id(self) -> str:
        return self._rt.manifest.bundle_id

    @property
    def on_probation(self) -> bool:
        return self._trial is not None

    @property
    def operating_point(self) -> str:
        return self._rt.operating_point

    @property
    def device_id(self) -> str:
        return self._rt.device_id

    @property
    def counters(self) -> dict[str, float]:
        """The active runtime's counters plus the counts of those it replaced (rates are the
        active runtime's), the update counters and the active bundle's version."""
        with self._lock:
            out = dict(self._rt.counters)
            idle = {} if self._trial is None else _own_counts(self._trial.previous)
            for extra in (self._retired, idle):
                for key, value in extra.items():
                    out[key] = out.get(key, 0.0) + value
            out.update(self.update_counters)
            out["bundle_version"] = float(self.version)
            out["on_probation"] = float(self._trial is not None)
        return out

    # -- decisions ---------------------------------------------------------------------------
    def predict(self, sensors: Mapping[str, Reader], **kw: Any) -> Decision:
        return self._decide(lambda rt: rt.predict(sensors, **kw))

    def predict_row(self, x: npt.ArrayLike, **kw: Any) -> Decision:
        return self._decide(lambda rt: rt.predict_row(x, **kw))

    def _decide(self, run: Callable[[EdgeRuntime], Decision]) -> Decision:
        verdict: Verdict | None = None
        try:
            with self._lock:
                trial = self._trial
                if trial is None:
                    return run(self._rt)
                try:
                    decision = run(self._rt)
                except Exception as exc:  # the new bundle cannot answer: back to the old one
                    verdict = self._end(False, f"a decision raised on the new bundle: {exc}")
                    return run(self._rt)
                verdict = self._judge(trial, decision)
                return decision
        finally:
            if verdict is not None and self.on_verdict is not None:
                self.on_verdict(verdict)

    def _judge(self, trial: _Trial, decision: Decision) -> Verdict | None:
        trial.decisions += 1
        trial.degraded += decision.source == "degraded"
        p = trial.probation
        if trial.decisions >= max(p.min_decisions, 1):
            rate = trial.degraded / trial.decisions
            if rate > p.max_degraded_rate:
                return self._end(False, f"degraded rate {rate:.3f} over {trial.decisions} "
                                        f"decisions exceeds the limit {p.max_degraded_rate:g}")
        if trial.decisions >= p.decisions:
            return self._end(True, "")
        return None

    def _end(self, keep: bool, reason: str) -> Verdict:
        """Close the probation (lock held): keep the new runtime or swap the previous back."""
        trial = self._trial
        assert trial is not None
        self._trial = None
        new, new_version = self._rt, self.version
        if keep:
            self.update_counters["updates_kept"] += 1
            retired = trial.previous
            self._fold(retired)
        else:
            self.update_counters["rollbacks"] += 1
            self._fold(new)
            self._rt, self.version, retired = trial.previous, trial.previous_version, new
        return Verdict(keep, new.manifest.bundle_id, new_version, reason, retired,
                       trial.decisions, trial.degraded)

    def _fold(self, runtime: EdgeRuntime) -> None:
        for key, value in _own_counts(runtime).items():
            self._retired[key] = self._retired.get(key, 0.0) + value

    # -- swapping ----------------------------------------------------------------------------
    def swap(self, runtime: EdgeRuntime, version: int, probation: Probation) -> None:
        """Make ``runtime`` answer from the next decision on, on probation (none when
        ``probation.decisions`` is 0). A bundle still on probation is ended first (rolled back:
        a newer one replaces it)."""
        verdict = None
        with self._lock:
            if self._trial is not None:
                verdict = self._end(False, "replaced by a newer bundle during probation")
            self._trial = _Trial(self._rt, self.version, probation)
            self._rt, self.version = runtime, version
            self.update_counters["updates_applied"] += 1
            kept = self._end(True, "") if probation.decisions <= 0 else None  # no probation
        for ended in (verdict, kept):
            if ended is not None and self.on_verdict is not None:
                self.on_verdict(ended)

    def close(self) -> None:
        """Run ``on_close`` (e.g. stop an update follower), then close every runtime held."""
        for callback in self.on_close:
            callback()
        with self._lock:
            trial, self._trial = self._trial, None
            self._rt.close()
            if trial is not None:
                trial.previous.close()


def _own_counts(runtime: EdgeRuntime) -> dict[str, float]:
    """A runtime's counts without its rates and without the (shared) uplink's counters."""
    shared = getattr(runtime.uplink, "counters", None)
    skip = set(shared) if isinstance(shared, Mapping) else set()
    return {k: float(v) for k, v in runtime.counters.items()
            if k not in skip and not k.endswith("rate")}
