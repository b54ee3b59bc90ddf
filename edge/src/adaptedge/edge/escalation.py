"""Escalation: read the HPC's unread sensors, send the request, wait for the cloud's answer.

Every way an escalation ends is counted once, under its own counter: no uplink (``NO_UPLINK``,
not counted as a fault), uplink down, the uplink raised (a transport bug must not crash the
device), deadline missed, an error reply from the cloud, a reply that does not match the
request. Each of these answers ``degraded`` with the local classifier's answer.

A regression bundle's escalation takes the cloud's ``ValueReply``: a reply of the other task
(an ``InferenceReply``), a non-finite value or another request's reply is a mismatched
reply (counted, never used); the answer is then the node's own value, ``degraded``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adaptedge.edge.audit import Auditor
from adaptedge.edge.counters import count_cloud_error
from adaptedge.edge.decision import Source
from adaptedge.edge.outbox import Outbox, keep_escalation
from adaptedge.edge.uplink import RequestIds, Uplink
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.protocol.features import pack_features
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.messages import (
    NO_LABEL,
    ErrorReply,
    InferenceReply,
    InferenceRequest,
    ValueReply,
)
from adaptedge.protocol.walk import ReadSensor, Trail

F32 = npt.NDArray[np.float32]
_MAX_CACHED_MASKS = 4096

# Why a decision was degraded (``Decision.error``); error replies carry the cloud's code.
NO_UPLINK = "no_uplink"
UPLINK_DOWN = "uplink_down"
DEADLINE = "deadline"
MISMATCHED_REPLY = "mismatched_reply"
SENSOR_FAILURE = "sensor_failure"
UPLINK_ERROR = "uplink_error"
log = logging.getLogger("edge")


@dataclass(slots=True)
class CloudAnswer:
    """How one escalation ended. ``sent``: a request went out (the link is paid)."""

    probabilities: F32
    label_index: int
    source: Source
    error: str | None
    request_id: int | None
    sent: bool
    seconds: float
    value: float | None = None
    """A regression bundle's answer (the cloud's, else the node's own)."""


class Escalation:
    """The device side of asking the cloud HPC; one per runtime (not thread-safe)."""

    def __init__(self, manifest: Manifest, *, uplink: Uplink | None, outbox: Outbox | None,
                 counters: dict[str, float], clock: Callable[[], float], device_id: str,
                 request_id_start: int | None, audit: AuditPolicy | None = None) -> None:
        self.manifest = manifest
        self.uplink = uplink
        self.outbox = outbox
        self._counters = counters
        self._clock = clock
        self._device_id = device_id
        index = {spec.name: i for i, spec in enumerate(manifest.sensors)}
        self.hpc_sensors = tuple(index[name] for name in manifest.hpc.sensors)
        self._hpc_sized = any(manifest.sensors[i].size_poly for i in self.hpc_sensors)
        self._sensor_cols = [np.asarray(s.features, dtype=np.intp) for s in manifest.sensors]
        self._n_classes = len(manifest.classes)
        self._regression = manifest.is_regression
        self._deadline_s = manifest.link.deadline_ms / 1000.0
        self._masks: dict[int, npt.NDArray[np.bool_]] = {}
        self._ids = RequestIds(request_id_start)
        self._points = {p.name: i for i, p in enumerate(manifest.operating_points)}
        self.point: int | None = None
        """Index of the operating point of the decision being made (kept with its record)."""
        self.decisions = 0
        """Decisions made so far: the next one's index for the audit choice."""
        self.auditor = None if audit is None else Auditor(manifest, audit, device_id,
                                                          self.hpc_sensors, counters)

    def decided(self, point: str, values: F32, trail: Trail, read: ReadSensor | None,
                local: F32, answered_locally: bool) -> None:
        """Called once per decision after its walk, before ``ask``: notes the operating point
        and, for a decision answered locally, lets the auditor audit it (``edge.audit``)."""
        self.point = self._points.get(point)
        index, self.decisions = self.decisions, self.decisions + 1
        if answered_locally and self.auditor is not None and self.point is not None:
            self.auditor.maybe_audit(index, self.point, values, trail, read, local,
                                     self.outbox, self._request)

    def ask(self, values: F32, trail: Trail, read: ReadSensor | None,
            local: F32, size: float | None = None) -> CloudAnswer:
        """Escalate a decision whose walk read ``trail`` and whose local answer is ``local``;
        the item's ``size`` travels with it when the HPC's sensors cost more on bigger items."""
        size = size if self._hpc_sized else None
        counters = self._counters
        counters["escalations"] += 1
        label = int(local.argmax())
        answer = CloudAnswer(local.copy(), label, "degraded", None, None, False, 0.0,
                             float(local[0]) if self._regression else None)
        uplink = self.uplink
        if uplink is None or not uplink.is_connected():
            answer.error = NO_UPLINK if uplink is None else UPLINK_DOWN
            if uplink is not None:
                counters["uplink_down"] += 1
            # offline: kept with what was measured, for store-and-forward
            self._record(self._request(values, trail.read_bits, label, float(local[label]), size),
                         answer.value)
            return answer
        trail.read(self.hpc_sensors, read, stop_at_failure=False)
        request = self._request(values, trail.read_bits, label, float(local[label]), size)
        answer.request_id = request.request_id
        self._record(request, answer.value)
        answer.sent = True
        t_send = self._clock()
        try:
            reply = uplink.exchange(request, t_send + self._deadline_s)
        except Exception:  # a transport bug must not crash the device
            log.exception("edge %s: the uplink raised; answering degraded", self._device_id)
            answer.error = UPLINK_ERROR
            counters["uplink_errors"] += 1
            answer.seconds = self._clock() - t_send
            return answer
        answer.seconds = self._clock() - t_send
        if reply is None:
            answer.error = DEADLINE
            counters["deadline_missed"] += 1
        elif isinstance(reply, ErrorReply):
            answer.error = reply.code
            count_cloud_error(counters, reply.code)
        elif not self._take(answer, reply, request.request_id):
            answer.error = MISMATCHED_REPLY
            counters["mismatched_replies"] += 1
        return answer

    def _record(self, request: InferenceRequest, local_value: float | None = None) -> None:
        """Keep ``request`` in the outbox (a regression device: with its own value)."""
        keep_escalation(self.outbox, request, self._counters, "escalated", self.point,
                        self.audit_fraction(), local_value)

    def audit_fraction(self) -> float:
        """The fraction of local decisions audited at the current point (0: no auditing)."""
        if self.auditor is None or self.point is None:
            return 0.0
        return self.auditor.policy.fraction_at(self.point)

    def _request(self, values: F32, read_bits: int, label: int,
                 confidence: float, size: float | None = None) -> InferenceRequest:
        """A request of the values read; a regression device offers no local label."""
        features, mask = pack_features(values, self._mask(read_bits))
        if self._regression:
            label, confidence = NO_LABEL, 0.0
        request_id = self._ids.next()
        return InferenceRequest(
            request_id=request_id, device=self._device_id, bundle_id=self.manifest.bundle_id,
            sent_at=self._clock(), deadline_ms=self.manifest.link.deadline_ms,
            features=features, mask=mask, local_label=label, local_confidence=confidence,
            size=size)

    def _mask(self, read_bits: int) -> npt.NDArray[np.bool_]:
        mask = self._masks.get(read_bits)
        if mask is None:
            mask = np.zeros(len(self.manifest.feature_names), dtype=bool)
            for i, cols in enumerate(self._sensor_cols):
                if read_bits >> i & 1:
                    mask[cols] = True
            if len(self._masks) < _MAX_CACHED_MASKS:
                self._masks[read_bits] = mask
        return mask

    def _take(self, answer: CloudAnswer, reply: InferenceReply | ValueReply,
              request_id: int) -> bool:
        """Answer from ``reply`` (source ``cloud``) if it answers ``request_id`` as the bundle's
        task asks: a finite value (regression), or one probability per class and a valid
        label (classification). False (``answer`` unchanged) otherwise."""
        if reply.request_id != request_id:
            return False
        if self._regression:
            if not isinstance(reply, ValueReply) or not _finite(reply.value):
                return False
            answer.value = float(reply.value)
        else:
            if not isinstance(reply, InferenceReply):
                return False
            probabilities = reply.probability_array()
            if (probabilities.shape[0] != self._n_classes
                    or not 0 <= reply.label < self._n_classes):
                return False
            answer.probabilities, answer.label_index = probabilities.copy(), reply.label
        answer.source = "cloud"
        return True


def _finite(value: object) -> bool:
    """A finite real number (an in-process uplink's reply is not checked by the codec)."""
    return type(value) in (float, int) and math.isfinite(value)  # type: ignore[arg-type]
