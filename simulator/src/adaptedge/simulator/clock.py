"""A simulated clock: a callable that returns the current simulated time in seconds.

The edge runtime takes ``clock=`` and never sleeps on it; the simulator moves it forward
(sensor latencies, round trips, deadlines), so a replay runs as fast as the code allows.
"""

from __future__ import annotations


class SimClock:
    """Monotonic simulated time (seconds). ``clock()`` reads it; ``advance*`` moves it forward."""

    __slots__ = ("now",)

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (negative values are ignored); returns the new time."""
        if seconds > 0.0:
            self.now += seconds
        return self.now

    def advance_to(self, t: float) -> float:
        """Move forward to ``t`` if it lies in the future; time never goes back."""
        if t > self.now:
            self.now = t
        return self.now
