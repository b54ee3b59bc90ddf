"""Escalation: read the HPC's unread sensors, send the request, wait for the cloud's answer.

Every way an escalation ends is counted once, under its own counter: no uplink (``NO_UPLINK``,
not counted as a fault), uplink down, the uplink raised (a transport bug must not crash the
device), deadline missed, an error reply from the cloud, a reply that does not match the
request. Each of these answers ``degraded`` with the local classifier's answer.
"""

from __future__ import annotations

import logging
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
from adaptedge.protocol.messages import ErrorReply, InferenceReply, InferenceRequest
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
        answer = CloudAnswer(local.copy(), label, "degraded", None, None, False, 0.0)
        uplink = self.uplink
        if uplink is None or not uplink.is_connected():
            answer.error = NO_UPLINK if uplink is None else UPLINK_DOWN
            if uplink is not None:
                counters["uplink_down"] += 1
            # offline: kept with what was measured, for store-and-forward
            self._record(self._request(values, trail.read_bits, label, float(local[label]), size))
            return answer
        trail.read(self.hpc_sensors, read, stop_at_failure=False)
        request = self._request(values, trail.read_bits, label, float(local[label]), size)
        answer.request_id = request.request_id
        self._record(request)
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
        else:
            probabilities = self._accept(reply, request.request_id)
            if probabilities is None:
                answer.error = MISMATCHED_REPLY
                counters["mismatched_replies"] += 1
            else:
                answer.probabilities, answer.label_index = probabilities, reply.label
                answer.source = "cloud"
        return answer

    def _record(self, request: InferenceRequest) -> None:
        keep_escalation(self.outbox, request, self._counters, "escalated", self.point)

    def _request(self, values: F32, read_bits: int, label: int,
                 confidence: float, size: float | None = None) -> InferenceRequest:
        features, mask = pack_features(values, self._mask(read_bits))
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

    def _accept(self, reply: InferenceReply, request_id: int) -> F32 | None:
        """The reply's probabilities if it answers ``request_id`` with one per class and a
        valid label, else None."""
        if reply.request_id != request_id:
            return None
        probabilities = reply.probability_array()
        if probabilities.shape[0] != self._n_classes or not 0 <= reply.label < self._n_classes:
            return None
        return probabilities.copy()
