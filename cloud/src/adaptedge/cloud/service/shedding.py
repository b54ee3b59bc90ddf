"""Load shedding: answer cheaply, without the HPC, what can no longer be answered in time.

A request carries ``sent_at`` on the *device's* clock (often a monotonic clock, so it is not
comparable with ours) and ``deadline_ms`` from then. ``RequestAges`` estimates how long a
request has been on its way anyway, per device, as its one-way delay minus the smallest
delay seen from that device (the classic skew-free relative delay): a request held 7 s in
a broker's queue is 7 s old whatever the two clocks say. The baseline may rise slowly
(``DRIFT``) to follow clock drift, and is reset when a device's clock jumps back (a
reboot) by more than ``REBASE_AFTER_S``.

That misses a backlog that every request of a device has sat in (a device that first shows
up while the worker is behind). ``BacklogProbe`` measures the worker's own backlog without any
clock: while busy, the worker sends itself a message through the broker, which queues behind
every request already waiting for the worker; its delay is how long requests wait now. A
request's age is the larger of the two.

``LoadShedder`` then refuses, before any compute: a request past its deadline (``expired``,
the device has answered on its own) and a request that has waited longer than the queue
bound (``overloaded``: the worker is behind; by default half the request's deadline, so
what is answered keeps half for the trip back through a broker that is congested too; a
third kept the 5x overload benchmark's answers further from the deadline but refused the
tail of an ordinary 200-request burst on a busy machine). Both errors are cheap replies, so a
worker behind its input catches up instead of computing answers nobody waits for.

A request's answer is ready only after the HPC ran, so ``shed_late`` adds the expected compute
time (``LoadShedder.row_s`` per row of the batch) to every age. That estimate must never lock
the worker (issue 31: one 7 s computation put it past every deadline, nothing was computed
again, so it never moved): it is the lower median of the last ``ROW_SAMPLES`` per-row times,
so one slow batch does not move it; the core feeds it compute time only (a lazy bundle load is
subtracted, a batch in which the HPC failed, e.g. a run cut at the time limit, is no sample);
and when nothing has been computed for ``REPROBE_AFTER_S`` the first request that only the
estimate would shed (in time on its queueing age alone) is computed anyway (``reprobes``), so
a stale estimate is measured again: at most one such request per interval, and a wrong
estimate is gone after at most ``ROW_SAMPLES // 2 + 1`` of them.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

import paho.mqtt.client as mqtt

from adaptedge.cloud.service.dedup import ContentKey
from adaptedge.protocol import errors as E
from adaptedge.protocol.codec import decode, encode
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.messages import ErrorReply, InferenceRequest, Telemetry

Pending = tuple[float, str, str, InferenceRequest | ErrorReply | bytes, ContentKey, float]
"""A request waiting in the worker: (received monotonic time, reply topic, device, request |
error | cached reply bytes, the request's content key (b"" when its reply must not touch
the dedup cache), its age in seconds on arrival)."""

DRIFT: Final = 1e-3
"""How fast a device's delay baseline may rise (s per s): 1000 ppm, far above clock drift."""
REBASE_AFTER_S: Final = 60.0
"""A relative delay above this is a clock jump, not queueing: restart the baseline."""
DEVICE_LIMIT: Final = 65_536
PROBE_EVERY_S: Final = 0.02
"""At most one backlog probe per this interval, and only one in flight."""
PROBE_LOST_AFTER_S: Final = 30.0
"""A probe not back by then is lost (a reconnection): send another."""
ROW_SAMPLES: Final = 5
"""Per-row compute times the estimate is the lower median of: one outlier never moves it."""
REPROBE_AFTER_S: Final = 0.5
"""Nothing computed for this long: compute one request only the estimate would shed."""


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
        bases = self._base
        base = bases.get(device)
        if base is None:
            if len(bases) >= DEVICE_LIMIT:
                bases.clear()
            bases[device] = (offset, received)
            return 0.0
        since = received - base[1]
        floor = base[0] + DRIFT * (since if since > 0.0 else 0.0)
        age = offset - floor
        if age <= 0.0 or age > REBASE_AFTER_S:
            self.clock_resets += age > REBASE_AFTER_S
            bases[device] = (offset, received)
            return 0.0
        bases[device] = (floor, received)
        return age


class BacklogProbe:
    """The worker's input backlog in seconds, measured by QoS 1 messages it sends itself on
    its own telemetry topic through ``client.publish`` (a paho client or a transport's wire);
    ``on_payload`` (or paho's ``on_message``) takes what comes back on that topic."""

    def __init__(self, client: Any, topic: str, source: str) -> None:
        self.delay_s = 0.0
        self._client, self._topic, self._source = client, topic, source
        self._sent_at: float | None = None
        self._last_sent = -math.inf
        self._seq = 0
        self._closed = False

    def close(self) -> None:
        """No more probes (the worker is draining and unsubscribed): the estimate is 0."""
        self._closed, self._sent_at, self.delay_s = True, None, 0.0

    def current(self, now: float) -> float:
        """Seconds requests now wait: the last probe's delay, or more if the probe in flight
        is older (what is read now queued ahead of it, so it waited at least that long)."""
        if self._sent_at is None:
            return self.delay_s
        return max(self.delay_s, now - self._sent_at)

    def send_if_due(self, busy: Callable[[], bool], now: float | None = None) -> int:
        """Send a probe if one is due and ``busy()`` (input is waiting); with no input
        waiting the backlog is empty. Returns the number of messages published."""
        if now is None:
            now = time.monotonic()
        if self._closed:
            return 0
        if self._sent_at is not None and now - self._sent_at < PROBE_LOST_AFTER_S:
            return 0  # one in flight
        if now - self._last_sent < PROBE_EVERY_S:
            return 0
        if not busy():
            self.delay_s = 0.0
            return 0
        self._seq += 1
        self._sent_at = self._last_sent = now
        payload = encode(Telemetry(self._source, 0.0, {"backlog_probe": self._seq}))
        self._client.publish(self._topic, payload, qos=1)
        return 1

    def on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        self.on_payload(message.payload)

    def on_payload(self, payload: bytes | bytearray) -> None:
        try:
            probe = decode(payload)
        except ProtocolError:
            return
        if type(probe) is Telemetry and probe.source == self._source and self._sent_at \
                is not None and probe.counters.get("backlog_probe") == self._seq:
            self.delay_s = max(0.0, time.monotonic() - self._sent_at)
            self._sent_at = None


class LoadShedder:
    """Decides, before compute, whether a request is answered or shed."""

    def __init__(self, max_queue_ms: float | None = None) -> None:
        if max_queue_ms is not None and not max_queue_ms > 0:
            raise ValueError(f"max_queue_ms must be > 0, got {max_queue_ms}")
        self.max_queue_s = None if max_queue_ms is None else max_queue_ms / 1000.0
        self.ages = RequestAges()
        self.expired = 0
        self.overloaded = 0
        self.reprobes = 0
        """Requests computed although the estimate would have shed them (``REPROBE_AFTER_S``)."""
        self.row_s = 0.0
        """The HPC's time per row (lower median of recent samples): an answer is ready after it."""
        self.computed_at = -math.inf
        """Monotonic time the HPC last ran (whether or not it gave a sample)."""
        self._samples: deque[float] = deque(maxlen=ROW_SAMPLES)

    def record_compute(self, rows: int, seconds: float, *, sample: bool = True,
                       now: float | None = None) -> None:
        """The HPC ran ``rows`` rows in ``seconds`` of compute; ``sample=False``: it ran, but
        its time says nothing about the next rows (a run cut at the limit, a failure)."""
        if rows <= 0:
            return
        self.computed_at = time.monotonic() if now is None else now
        if sample and seconds >= 0.0:
            self._samples.append(seconds / rows)
            ordered = sorted(self._samples)
            self.row_s = ordered[(len(ordered) - 1) // 2]

    def reprobe_due(self, now: float) -> bool:
        """Nothing computed for ``REPROBE_AFTER_S``: the estimate may be stale."""
        return now - self.computed_at >= REPROBE_AFTER_S

    def queue_bound_s(self, deadline_s: float) -> float:
        """How long a request with this deadline may have waited and still be computed."""
        return deadline_s / 2 if self.max_queue_s is None else self.max_queue_s

    def in_time(self, request: InferenceRequest, age_s: float) -> bool:
        """``verdict`` would compute it (nothing counted, no message built)."""
        deadline_s = request.deadline_ms / 1000.0
        return age_s < deadline_s and age_s < self.queue_bound_s(deadline_s)

    def verdict(self, request: InferenceRequest, age_s: float) -> tuple[str, str] | None:
        """``None`` to compute it, else the ``(code, message)`` to shed it with."""
        deadline_s = request.deadline_ms / 1000.0
        if age_s >= deadline_s:
            self.expired += 1
            return (E.EXPIRED, f"the request was {age_s * 1000:.0f} ms old on reaching the "
                    f"worker, past its {request.deadline_ms:g} ms deadline: not computed")
        bound = self.queue_bound_s(deadline_s)
        if age_s >= bound:
            self.overloaded += 1
            return (E.OVERLOADED, f"the worker is behind: the request waited {age_s * 1000:.0f} "
                    f"ms (queue bound {bound * 1000:.0f} ms); answer locally or retry later")
        return None


def shed_late(items: list[Pending], shedder: LoadShedder, backlog: BacklogProbe,
              error: Callable[[str, int | None, str, str], ErrorReply],
              now: float | None = None) -> list[InferenceRequest]:
    """Replace, in place, the requests that can no longer be answered in time by their shed
    errors (``error(device, request_id, code, message)``); return the requests to compute."""
    if now is None:
        now = time.monotonic()
    verdict, in_time, requests = shedder.verdict, shedder.in_time, []
    backlog_s = backlog.current(now)
    compute_s = shedder.row_s * len(items)  # the answer is ready only after the batch ran
    reprobe = compute_s > 0.0 and shedder.reprobe_due(now)
    for k, (received, reply_to, device, entry, digest, age) in enumerate(items):
        if type(entry) is InferenceRequest:
            waited = max(age, backlog_s) + (now - received)
            if reprobe and not in_time(entry, waited + compute_s) and in_time(entry, waited):
                reprobe = False  # only the estimate sheds it: compute it, measure again
                shedder.reprobes += 1
                requests.append(entry)
                continue
            shed = verdict(entry, waited + compute_s)
            if shed is None:
                requests.append(entry)
            else:
                items[k] = (received, reply_to, device, error(device, entry.request_id, *shed),
                            digest, age)
    return requests
