"""``EdgeRuntime``: load a verified bundle, walk its policy on live sensors, escalate hard inputs.

The rules of the walk are in ``edge.policy``. The local path makes one onnxruntime call per
visited node on pre-bound buffers; costs come from a table keyed by the set of sensors read,
filled once per set by ``protocol.costs.decision_cost`` (the one definition).

A runtime is not thread-safe: use one per thread (each holds its own bound buffers).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

import numpy as np
import numpy.typing as npt

from adaptedge.edge.counters import count_cloud_error, new_counters, with_rates
from adaptedge.edge.decision import Decision, Source
from adaptedge.edge.errors import BundleRefused, EdgeError, OperatingPointError
from adaptedge.edge.outbox import Outbox, keep_escalation
from adaptedge.edge.policy import (
    ACQUIRE,
    ESCALATE,
    STOP,
    CompiledNode,
    CompiledPolicy,
    ModelStore,
    compile_policy,
)
from adaptedge.edge.sensors import Reader, ReaderPool, read_sensor, resolve_timeouts
from adaptedge.edge.uplink import RequestIds, Uplink
from adaptedge.protocol.bundle import open_bundle, verify
from adaptedge.protocol.costs import CostBreakdown, decision_cost
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.features import pack_features
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.messages import ErrorReply, InferenceReply, InferenceRequest

F32 = npt.NDArray[np.float32]
_MAX_CACHED_SETS = 4096

# Why a decision was degraded (``Decision.error``); error replies carry the cloud's code.
NO_UPLINK = "no_uplink"
UPLINK_DOWN = "uplink_down"
DEADLINE = "deadline"
MISMATCHED_REPLY = "mismatched_reply"
SENSOR_FAILURE = "sensor_failure"
UPLINK_ERROR = "uplink_error"
log = logging.getLogger("edge")


class EdgeRuntime:
    """The device half of adaptedge. Build it with ``EdgeRuntime.load``."""

    def __init__(self, manifest: Manifest, models: ModelStore, *, uplink: Uplink | None,
                 clock: Callable[[], float], device_id: str,
                 sensor_timeouts_ms: Mapping[str, float] | None, outbox: Outbox | None,
                 max_reader_threads: int, request_id_start: int | None,
                 max_resident_policies: int, cleanup: ExitStack | None = None) -> None:
        if max_resident_policies < 1:
            raise EdgeError(f"max_resident_policies must be >= 1, got {max_resident_policies}")
        self.manifest = manifest
        self.device_id = device_id
        self.uplink = uplink
        self.outbox = outbox
        self._models = models
        self._resident: OrderedDict[str, CompiledPolicy] = OrderedDict()
        self._max_resident = max_resident_policies
        self._cleanup = cleanup
        self._clock = clock
        self._classes = manifest.classes
        self._n_features = len(manifest.feature_names)
        self._sensor_names = tuple(s.name for s in manifest.sensors)
        self._sensor_cols = [np.asarray(s.features, dtype=np.intp) for s in manifest.sensors]
        self._sensor_timeouts = resolve_timeouts(manifest.sensors, sensor_timeouts_ms or {})
        index = {name: i for i, name in enumerate(self._sensor_names)}
        self._hpc_sensors = tuple(index[name] for name in manifest.hpc.sensors)
        self._deadline_s = manifest.link.deadline_ms / 1000.0
        self._buf: F32 = np.zeros(self._n_features, dtype=np.float32)
        self._pool = ReaderPool(max_reader_threads)
        self._costs: dict[int, CostBreakdown] = {}
        self._masks: dict[int, npt.NDArray[np.bool_]] = {}
        self._counters = new_counters()
        self._tally: dict[tuple[str, int], int] = {}
        """(source, cost key) -> decisions: the per-decision counters, summed when read."""
        self._ids = RequestIds(request_id_start)
        self._point = manifest.default_operating_point
        self._policy = self._activate(manifest.operating_point(self._point).policy)

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def load(cls, bundle_dir: str | os.PathLike[str], *, uplink: Uplink | None = None,
             operating_point: str | float | None = None,
             clock: Callable[[], float] = time.monotonic, device_id: str = "edge",
             sensor_timeouts_ms: Mapping[str, float] | None = None,
             outbox: Outbox | None = None, max_reader_threads: int = 4,
             request_id_start: int | None = None, preload_all: bool = False,
             max_resident_policies: int = 2) -> EdgeRuntime:
        """Verify every file hash of a bundle (directory or ``.tar``), then build the sessions
        of the operating point in use.

        A bundle may hold dozens of operating points; only the policies in use stay resident
        (at most ``max_resident_policies``, least recently used dropped first). Switching to a
        point loads its models then, re-checking each file's hash. ``preload_all`` builds (and
        so checks) every policy's sessions now; they stay resident if ``max_resident_policies``
        allows. ``sensor_timeouts_ms`` overrides the bundle's per-sensor ``timeout_ms``; the key
        ``"*"`` sets the timeout of every sensor the bundle gives none (default
        ``edge.sensors.DEFAULT_TIMEOUT_MS``, 1 s; ``math.inf``: no timeout). ``request_id_start``
        fixes the first request id (default: a random 63-bit base, so a restarted device does
        not reuse ids the cloud may still remember, whatever its clock says).
        """
        cleanup = ExitStack()
        try:
            root = Path(cleanup.enter_context(open_bundle(bundle_dir)))  # a .tar stays extracted
            manifest = verify(root)  # every hash, before any session exists
            runtime = cls(manifest, ModelStore(manifest, root), uplink=uplink, clock=clock,
                          device_id=device_id, sensor_timeouts_ms=sensor_timeouts_ms,
                          outbox=outbox, max_reader_threads=max_reader_threads,
                          request_id_start=request_id_start,
                          max_resident_policies=max_resident_policies, cleanup=cleanup)
            if preload_all:
                for name in manifest.policies:
                    runtime._activate(name)
            if operating_point is not None:
                runtime.set_operating_point(operating_point)
            elif preload_all:
                runtime._policy = runtime._activate(runtime._policy.name)
        except BundleRefused:
            cleanup.close()
            raise
        except BundleError as exc:
            cleanup.close()
            raise BundleRefused(exc.message, path=exc.path) from exc
        except BaseException:
            cleanup.close()
            raise
        return runtime

    def _activate(self, policy: str) -> CompiledPolicy:
        """The compiled policy, built now if it is not resident; drops the least recent."""
        compiled = self._resident.get(policy)
        if compiled is None:
            compiled = compile_policy(self.manifest, policy, self.manifest.policies[policy],
                                      self._models)
            self._resident[policy] = compiled
            while len(self._resident) > self._max_resident:
                self._resident.popitem(last=False)
            keep: set[tuple[str, int, int]] = set()
            for resident in self._resident.values():
                keep |= resident.session_keys()
            self._models.keep_only(keep)
        self._resident.move_to_end(policy)
        return compiled

    @property
    def resident_policies(self) -> tuple[str, ...]:
        """Policies whose sessions are loaded, least recently used first."""
        return tuple(self._resident)

    # -- operating points --------------------------------------------------------------------
    @property
    def operating_point(self) -> str:
        return self._point

    def set_operating_point(self, name_or_budget: str | float) -> None:
        """Switch by name, or by budget: the most accurate point whose cost is <= the budget."""
        points = self.manifest.operating_points
        if isinstance(name_or_budget, str):
            names = [p.name for p in points]
            if name_or_budget not in names:
                raise OperatingPointError(f"no operating point {name_or_budget!r}; the bundle "
                                          f"has {names}")
            point = self.manifest.operating_point(name_or_budget)
        else:
            budget = float(name_or_budget)
            fitting = [p for p in points if p.cost <= budget]
            if not fitting or math.isnan(budget):
                cheapest = min(points, key=lambda p: p.cost)
                raise OperatingPointError(
                    f"no operating point costs <= {budget:g}; the cheapest is "
                    f"{cheapest.name!r} at {cheapest.cost:g}")
            point = max(fitting, key=lambda p: (p.accuracy, -p.cost))
        self._policy = self._activate(point.policy)
        self._point = point.name

    # -- counters ------------------------------------------------------------------------------
    @property
    def counters(self) -> dict[str, float]:
        """Decisions by source, escalations, faults, cost spent, and the uplink's own counters."""
        totals = dict(self._counters)
        for (source, key), n in self._tally.items():
            cost = self._costs.get(key) or self._cost(key)
            totals["decisions"] += n
            totals["decisions_" + source] += n
            totals["energy_mj"] += n * cost.energy_mj
            totals["latency_ms"] += n * cost.latency_ms
            totals["money"] += n * cost.money
            totals["bytes"] += n * cost.bytes
            totals["cost"] += n * cost.scalar
        out = with_rates(totals)
        extra = getattr(self.uplink, "counters", None)
        if isinstance(extra, Mapping):
            for key, value in extra.items():
                out[key] = out.get(key, 0.0) + float(value) if key in out else float(value)
        return out

    # -- prediction ----------------------------------------------------------------------------
    def predict(self, sensors: Mapping[str, Reader]) -> Decision:
        """Walk the policy reading live sensors (only those it asks for, in order)."""
        buf = self._buf
        buf.fill(0.0)
        names, cols, timeouts, pool = (self._sensor_names, self._sensor_cols,
                                       self._sensor_timeouts, self._pool)
        counters = self._counters

        def read(s: int) -> str | None:
            values, why = read_sensor(sensors.get(names[s]), len(cols[s]), timeouts[s], pool)
            if values is None:
                counters["sensor_failures"] += 1
                return why
            buf[cols[s]] = values
            return None

        return self._decide(buf, read)

    def predict_row(self, x: npt.ArrayLike) -> Decision:
        """Replay a fully-measured row: the walk still "reads" only the sensors it asks for.

        A sensor whose columns hold NaN or infinity counts as a failed read.
        """
        row = np.asarray(x, dtype=np.float32)
        if row.ndim != 1:
            row = row.reshape(-1)
        if row.shape[0] != self._n_features:
            names = self.manifest.feature_names
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise EdgeError(f"a row has {row.shape[0]} values; this bundle takes "
                            f"{self._n_features} features ({shown})")
        # A Python float sum of float32 values cannot overflow and raises no numpy warning:
        # it is finite iff every value is (faster than np.isfinite for short rows).
        if (math.isfinite(sum(row.tolist())) if self._n_features <= 64
                else bool(np.isfinite(row).all())):
            return self._decide(row, None)
        row = row.copy()
        cols, counters = self._sensor_cols, self._counters

        def read(s: int) -> str | None:
            values = row[cols[s]]
            if np.isfinite(values).all():
                return None
            row[cols[s]] = 0.0
            counters["sensor_failures"] += 1
            return "row holds non-finite values (NaN or infinity) for this sensor"

        return self._decide(row, read)

    def _decide(self, values: F32, read: Callable[[int], str | None] | None) -> Decision:
        clock = self._clock
        t0 = clock()
        node: CompiledNode = self._policy.root
        names = self._sensor_names
        read_bits = 0
        failed_bits = 0
        order: list[int] = []
        failed: dict[str, str] = {}
        nodes: list[str] = []
        error: str | None = None

        # Enter the root: read its sensors in listed order.
        if read is None:
            read_bits = node.sensor_bits
            order.extend(node.sensors)
        else:
            for s in node.sensors:
                why = read(s)
                if why is None:
                    read_bits |= 1 << s
                    order.append(s)
                else:
                    failed[names[s]] = why
                    failed_bits |= 1 << s
        root_failed = failed_bits != 0

        kind = STOP
        while True:
            nodes.append(node.id)
            session = node.session
            values.take(node.inputs, out=session.x_row, mode="clip")
            session.run()
            if root_failed:
                # The root model ran with the failed columns at 0: its scores are not
                # trustworthy; escalate if the root may, else answer degraded.
                has_escalate = any(a.kind == ESCALATE for a in node.actions)
                kind = ESCALATE if has_escalate else -1
                break
            idx = 0 if node.single else int(session.scores_row.argmax())
            action = node.actions[idx]
            kind = action.kind
            if kind != ACQUIRE:
                break
            target = action.next
            assert target is not None
            if read is None:  # replay: every sensor of this node was read
                order.extend(action.new_sensors)
                read_bits = target.sensor_bits
                node = target
                continue
            # Live sensors: entering may fail; then take the next-best action still possible.
            ranked: list[int] | None = None
            tried: set[int] = set()
            moved = False
            while True:
                if kind == ACQUIRE:
                    target = node.actions[idx].next
                    assert target is not None
                    ok = True
                    for s in target.sensors:
                        if read_bits >> s & 1:
                            continue
                        if failed_bits >> s & 1:  # failed once: not retried this decision
                            ok = False
                            break
                        why = read(s)
                        if why is not None:
                            failed[names[s]] = why
                            failed_bits |= 1 << s
                            ok = False
                            break
                        read_bits |= 1 << s
                        order.append(s)
                    if ok:
                        node = target
                        moved = True
                        break
                else:
                    break
                tried.add(idx)
                if ranked is None:
                    ranked = node.ranked_actions()
                nxt = _next_possible(node, ranked, tried, failed_bits)
                if nxt is None:
                    kind = -1  # nothing left the policy could do
                    break
                idx = nxt
                kind = node.actions[idx].kind
            if moved:
                continue
            break

        proba = session.proba_row
        local_idx = int(proba.argmax())
        source: Source = "local"
        sent = False
        request_id: int | None = None
        t_local = clock() - t0
        t_cloud = 0.0
        counters = self._counters
        if kind == ESCALATE:
            counters["escalations"] += 1
            probabilities = proba.copy()
            label_index = local_idx
            source = "degraded"
            uplink = self.uplink
            if uplink is None:
                error = NO_UPLINK
            elif not uplink.is_connected():
                error = UPLINK_DOWN
                counters["uplink_down"] += 1
            else:
                for s in self._hpc_sensors:
                    bit = 1 << s
                    if read_bits & bit or failed_bits & bit:
                        continue
                    why = None if read is None else read(s)
                    if why is None:
                        read_bits |= bit
                        order.append(s)
                    else:
                        failed[names[s]] = why
                        failed_bits |= bit
                request = self._request(values, read_bits, local_idx, float(proba[local_idx]))
                request_id = request.request_id
                keep_escalation(self.outbox, request, counters)
                sent = True
                t_send = clock()
                try:
                    reply = uplink.exchange(request, t_send + self._deadline_s)
                except Exception:  # a transport bug must not crash the device
                    log.exception("edge %s: the uplink raised; answering degraded",
                                  self.device_id)
                    reply = ErrorReply(request_id, self.device_id, UPLINK_ERROR,
                                       "the uplink raised", 0.0)
                    counters["uplink_errors"] += 1
                    counters["cloud_errors"] -= 1  # counted below as an error reply
                t_cloud = clock() - t_send
                if reply is None:
                    error = DEADLINE
                    counters["deadline_missed"] += 1
                elif isinstance(reply, ErrorReply):
                    error = reply.code
                    count_cloud_error(counters, reply.code)
                else:
                    cloud = self._accept(reply, request_id)
                    if cloud is None:
                        error = MISMATCHED_REPLY
                        counters["mismatched_replies"] += 1
                    else:
                        probabilities, label_index = cloud
                        source = "cloud"
            if not sent and self.outbox is not None:  # offline: kept with what was measured
                keep_escalation(self.outbox, self._request(
                    values, read_bits, local_idx, float(proba[local_idx])), counters)
        else:
            probabilities = proba.copy()
            label_index = local_idx
            if kind != STOP:
                source = "degraded"
                error = SENSOR_FAILURE
        key = read_bits << 1 | sent
        cost = self._costs.get(key) or self._cost(key)
        tally_key = (source, key)
        tally = self._tally
        tally[tally_key] = tally.get(tally_key, 0) + 1
        return Decision(
            label=self._classes[label_index],
            label_index=label_index,
            probabilities=probabilities,
            source=source,
            sensors_read=tuple(map(names.__getitem__, order)),
            failed_sensors=failed,
            nodes=tuple(nodes),
            escalated=kind == ESCALATE,
            cost=cost,
            request_id=request_id,
            timings={"total": clock() - t0, "local": t_local, "cloud": t_cloud},
            error=error,
        )

    # -- helpers -------------------------------------------------------------------------------
    def _cost(self, key: int) -> CostBreakdown:
        """Cost of reading sensor set ``key >> 1`` (bit i = sensor i); escalated if ``key & 1``."""
        read_bits = key >> 1
        names = [n for i, n in enumerate(self._sensor_names) if read_bits >> i & 1]
        cost = decision_cost(self.manifest, names, bool(key & 1))
        if len(self._costs) < _MAX_CACHED_SETS:
            self._costs[key] = cost
        return cost

    def _mask(self, read_bits: int) -> npt.NDArray[np.bool_]:
        mask = self._masks.get(read_bits)
        if mask is None:
            mask = np.zeros(self._n_features, dtype=bool)
            for i, cols in enumerate(self._sensor_cols):
                if read_bits >> i & 1:
                    mask[cols] = True
            if len(self._masks) < _MAX_CACHED_SETS:
                self._masks[read_bits] = mask
        return mask

    def _request(self, values: F32, read_bits: int, label: int,
                 confidence: float) -> InferenceRequest:
        features, mask = pack_features(values, self._mask(read_bits))
        request_id = self._ids.next()
        return InferenceRequest(
            request_id=request_id, device=self.device_id, bundle_id=self.manifest.bundle_id,
            sent_at=self._clock(), deadline_ms=self.manifest.link.deadline_ms,
            features=features, mask=mask, local_label=label, local_confidence=confidence)

    def _accept(self, reply: InferenceReply,
                request_id: int) -> tuple[F32, int] | None:
        if reply.request_id != request_id:
            return None
        probabilities = reply.probability_array()
        n = len(self._classes)
        if probabilities.shape[0] != n or not 0 <= reply.label < n:
            return None
        return probabilities.copy(), reply.label

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        """Release the sensor reader threads and a ``.tar`` bundle's extracted copy (the uplink
        belongs to the caller)."""
        self._pool.close()
        if self._cleanup is not None:
            self._cleanup.close()

    def __enter__(self) -> EdgeRuntime:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"EdgeRuntime(bundle={self.manifest.bundle_id!r}, "
                f"operating_point={self._point!r}, device={self.device_id!r})")


def _next_possible(node: CompiledNode, ranked: list[int], tried: set[int],
                   failed_bits: int) -> int | None:
    """The best-ranked action not tried yet whose target needs no failed sensor."""
    for i in ranked:
        if i in tried:
            continue
        action = node.actions[i]
        if action.kind == ACQUIRE:
            assert action.next is not None
            if action.next.sensor_bits & failed_bits:
                continue
        return i
    return None

