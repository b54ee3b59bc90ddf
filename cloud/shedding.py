"""Load shedding: answer cheaply, without the HPC, what can no longer be answered in time.

A request carries ``sent_at`` on the *device's* clock (often a monotonic clock, so it is not
comparable with ours) and ``deadline_ms`` from then. ``RequestAges`` estimates how long a
request has been on its way anyway, per device, as its one-way delay minus the smallest
delay seen from that device (the classic skew-free relative delay): a request held 7 s in
a broker's queue is 7 s old whatever the two clocks say. The baseline may rise slowly
(``DRIFT``) to follow clock drift, and is reset when a device's clock jumps back (a
reboot) by more than ``REBASE_AFTER_S``.

``LoadShedder`` then refuses, before any compute: a request past its deadline (``expired``,
the device has answered on its own) and a request that has waited longer than the queue
bound (``overloaded``: the worker is behind; by default half the request's deadline, so
what is answered still has time to travel back). Both errors are cheap replies, so a
worker behind its input catches up instead of computing answers nobody waits for.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Final

from adaptedge.protocol import errors as E
from adaptedge.protocol.messages import ErrorReply, InferenceRequest

Pending = tuple[float, str, str, InferenceRequest | ErrorReply | bytes, bytes, float]
"""A request waiting in the worker: (received monotonic time, reply topic, device, request |
error | cached reply bytes, the request's content digest (b"" when its reply must not touch
the dedup cache), its age in seconds on arrival)."""

DRIFT: Final = 1e-3
"""How fast a device's delay baseline may rise (s per s): 1000 ppm, far above clock drift."""
REBASE_AFTER_S: Final = 60.0
"""A relative delay above this is a clock jump, not queueing: restart the baseline."""
DEVICE_LIMIT: Final = 65_536


class RequestAges:
    """Per-device relative one-way delay, in seconds on the worker's monotonic clock."""

    def __init__(self) -> None:
        self._base: dict[str, tuple[float, float]] = {}  # device -> (min offset, at)
        self.clock_resets = 0

    def age_on_arrival(self, device: str, sent_at: float, received: float) -> float:
        """How long this request has been on its way when it reached the worker (>= 0)."""
        offset = received - sent_at
        if not math.isfinite(offset):
            return 0.0
        base = self._base.get(device)
        if base is None:
            if len(self._base) >= DEVICE_LIMIT:
                self._base.clear()
            self._base[device] = (offset, received)
            return 0.0
        floor = base[0] + DRIFT * max(0.0, received - base[1])
        age = offset - floor
        if age <= 0.0 or age > REBASE_AFTER_S:
            self.clock_resets += age > REBASE_AFTER_S
            self._base[device] = (offset, received)
            return 0.0
        self._base[device] = (floor, received)
        return age


class LoadShedder:
    """Decides, before compute, whether a request is answered or shed."""

    def __init__(self, max_queue_ms: float | None = None) -> None:
        if max_queue_ms is not None and not max_queue_ms > 0:
            raise ValueError(f"max_queue_ms must be > 0, got {max_queue_ms}")
        self.max_queue_s = None if max_queue_ms is None else max_queue_ms / 1000.0
        self.ages = RequestAges()
        self.expired = 0
        self.overloaded = 0

    def verdict(self, request: InferenceRequest, age_s: float) -> tuple[str, str] | None:
        """``None`` to compute it, else the ``(code, message)`` to shed it with."""
        deadline_s = request.deadline_ms / 1000.0
        if age_s >= deadline_s:
            self.expired += 1
            return (E.EXPIRED, f"the request was {age_s * 1000:.0f} ms old on reaching the "
                    f"worker, past its {request.deadline_ms:g} ms deadline: not computed")
        bound = deadline_s / 2 if self.max_queue_s is None else self.max_queue_s
        if age_s >= bound:
            self.overloaded += 1
            return (E.OVERLOADED, f"the worker is behind: the request waited {age_s * 1000:.0f} "
                    f"ms (queue bound {bound * 1000:.0f} ms); answer locally or retry later")
        return None


def shed_late(items: list[Pending], shedder: LoadShedder,
              error: Callable[[str, int | None, str, str], ErrorReply]) -> list[InferenceRequest]:
    """Replace, in place, the requests that can no longer be answered in time by their shed
    errors (``error(device, request_id, code, message)``); return the requests to compute."""
    now, verdict, requests = time.monotonic(), shedder.verdict, []
    for k, (received, reply_to, device, entry, digest, age) in enumerate(items):
        if type(entry) is InferenceRequest:
            shed = verdict(entry, age + (now - received))
            if shed is None:
                requests.append(entry)
            else:
                items[k] = (received, reply_to, device, error(device, entry.request_id, *shed),
                            digest, age)
    return requests
