"""A seeded model of the uplink: round-trip distribution, loss, bandwidth, scheduled outages.

Round trips are log-normal around a median (``rtt_ms``, spread ``jitter`` = sigma of the
log), plus the serialisation time of both messages at ``bandwidth_kbps``. A request is lost
with probability ``loss``; nothing gets through during an outage. Random draws come from one
``numpy`` generator in fixed-size blocks, so a seed fixes every draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from adaptedge.protocol.manifest import LinkSpec

_BLOCK = 4096


@dataclass(frozen=True, slots=True)
class Outage:
    """The link is down from ``start_s`` for ``duration_s`` (seconds from the run's start)."""

    start_s: float
    duration_s: float

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    def covers(self, t: float) -> bool:
        return self.start_s <= t < self.end_s


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    """Link impairments. ``rtt_ms=None`` takes the bundle's ``LinkSpec.rtt_ms``."""

    rtt_ms: float | None = None
    jitter: float = 0.0
    loss: float = 0.0
    bandwidth_kbps: float = 0.0
    """0 = unlimited."""
    outages: tuple[Outage, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.rtt_ms is not None and self.rtt_ms < 0:
            raise ValueError(f"network.rtt_ms must be >= 0, got {self.rtt_ms}")
        if self.jitter < 0:
            raise ValueError(f"network.jitter must be >= 0 (sigma of log rtt), got {self.jitter}")
        if not 0.0 <= self.loss <= 1.0:
            raise ValueError(f"network.loss must be a probability in [0, 1], got {self.loss}")
        if self.bandwidth_kbps < 0:
            raise ValueError(f"network.bandwidth_kbps must be >= 0 (0 = unlimited), "
                             f"got {self.bandwidth_kbps}")
        for o in self.outages:
            if o.start_s < 0 or o.duration_s <= 0:
                raise ValueError(f"an outage needs start_s >= 0 and duration_s > 0, got {o}")

    @property
    def impaired(self) -> bool:
        return bool(self.jitter or self.loss or self.bandwidth_kbps or self.outages
                    or self.rtt_ms)


class NetworkModel:
    """Draws the fate of each exchange: ``round_trip_s`` returns seconds, or None if lost."""

    def __init__(self, config: NetworkConfig, link: LinkSpec, seed: int = 0) -> None:
        self.config = config
        rtt_ms = link.rtt_ms if config.rtt_ms is None else config.rtt_ms
        self.median_s = rtt_ms / 1000.0
        self.sigma = config.jitter
        self.loss = config.loss
        self.bytes_per_s = config.bandwidth_kbps * 1000.0 / 8.0
        self.outages = tuple(sorted(config.outages, key=lambda o: o.start_s))
        self._rng = np.random.default_rng(seed)
        self._uniform: list[float] = []
        self._normal: list[float] = []

    def is_up(self, t: float) -> bool:
        return all(not outage.covers(t) for outage in self.outages)

    def _next_uniform(self) -> float:
        if not self._uniform:
            self._uniform = self._rng.random(_BLOCK).tolist()[::-1]
        return self._uniform.pop()

    def _next_normal(self) -> float:
        if not self._normal:
            self._normal = self._rng.standard_normal(_BLOCK).tolist()[::-1]
        return self._normal.pop()

    def take_draws(self, n: int) -> tuple[list[float], list[float]]:
        """The uniform and normal values the next ``n`` calls of ``round_trip_s`` on an up link
        would draw (empty lists for a draw the config never makes), consumed from the same
        blocks in the same order: a batched replay sees exactly the per-call sequence."""
        uniform: list[float] = []
        normal: list[float] = []
        need = n if self.loss > 0.0 or self.sigma > 0.0 else 0
        while need > 0:
            if self.loss > 0.0 and not self._uniform:
                self._uniform = self._rng.random(_BLOCK).tolist()[::-1]
            if self.sigma > 0.0 and not self._normal:
                self._normal = self._rng.standard_normal(_BLOCK).tolist()[::-1]
            k = min([need] + [len(lst) for lst, on in ((self._uniform, self.loss > 0.0),
                                                        (self._normal, self.sigma > 0.0)) if on])
            for lst, out, on in ((self._uniform, uniform, self.loss > 0.0),
                                 (self._normal, normal, self.sigma > 0.0)):
                if on:
                    out.extend(lst[:-k - 1:-1])
                    del lst[-k:]
            need -= k
        return uniform, normal

    def round_trip_s(self, t: float, request_bytes: int, reply_bytes: int) -> float | None:
        """Seconds from sending at ``t`` until the reply arrives, or None (outage or loss).

        Exactly one uniform and one normal value are drawn per call when the link is up, so
        the sequence of draws depends only on the seed and the sequence of calls.
        """
        if self.outages and not self.is_up(t):
            return None
        lost = self.loss > 0.0 and self._next_uniform() < self.loss
        rtt = self.median_s
        if self.sigma > 0.0:
            rtt *= math.exp(self.sigma * self._next_normal())
        if lost:
            return None
        if self.bytes_per_s > 0.0:
            rtt += (request_bytes + reply_bytes) / self.bytes_per_s
        return rtt
