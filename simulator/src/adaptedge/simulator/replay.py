"""Replay: the real ``EdgeRuntime`` over a dataset split, with a simulated clock and the
cloud's real ``HpcInference`` in-process behind a simulated uplink (no broker).

By default ``replay`` computes the same decisions column-wise (``simulator.batch_replay``:
one batched walk, then each device's uplink); what follows describes the per-row path
(``batched=False``, and rows holding NaN or infinity: failed reads).

Every escalation is encoded and decoded with the wire codec, goes through the network
model (outages, loss, round trip, bandwidth) and, if it arrives before the deadline, is
answered by ``HpcInference.handle_batch``. The clock only moves forward by simulated
amounts (arrivals at ``rate_hz``, round trips, deadlines): no real sleeps.

Speed: HPC answers are computed by ``handle_batch`` over blocks of rows (``prefetch``) and
used only for a request carrying exactly the feature and mask bytes of the batch, so the
answer is the one ``handle_batch`` gives that request; any other request is answered by a
live call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.cloud import HpcInference
from adaptedge.protocol.bundle import verify
from adaptedge.protocol.codec import decode, encode
from adaptedge.protocol.costs import sensor_cost
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.messages import ErrorReply, InferenceReply, InferenceRequest, ValueReply
from adaptedge.simulator.batch_replay import (
    REPLY_ESTIMATE,
    column_arrays,
    device_columns,
    escalation_timeline,
    walk_local,
)
from adaptedge.simulator.batch_wire import wire_sizes
from adaptedge.simulator.clock import SimClock
from adaptedge.simulator.network import NetworkModel
from adaptedge.simulator.records import DecisionColumns, RunResult
from adaptedge.simulator.replay_session import ReplaySession, as_session
from adaptedge.simulator.scenario import Scenario

Reply = InferenceReply | ValueReply | ErrorReply
Answer = InferenceReply | ValueReply


class SimulatedUplink:
    """The edge's ``Uplink`` over the network model and an in-process ``HpcInference``.

    Every request is encoded (its real size goes to the network model and the byte counts).
    HPC answers come from ``handle_batch`` over blocks of upcoming rows under the mask the
    runtime actually sent, keyed by the exact feature and mask bytes: a request whose bytes
    are not in the block is decoded and answered by a live ``handle_batch`` call.
    """

    def __init__(self, hpc: Any, network: NetworkModel, clock: SimClock, *,
                 manifest: Manifest, rows: npt.NDArray[np.float32] | None = None,
                 block: int = 512) -> None:
        self.hpc = hpc
        self.network = network
        self.clock = clock
        self.manifest = manifest
        self.rows = rows
        self.block = block
        self.row_index = 0
        """The replay sets this to the row being decided, so prefetching starts there."""
        self.sent = self.answered = self.timed_out = self.live_calls = 0
        self.bytes_tx = self.bytes_rx = 0
        self._cache: dict[tuple[bytes, bytes], Answer] = {}
        self._fetched: set[tuple[int, bytes]] = set()
        self._reply_estimate = REPLY_ESTIMATE

    def is_connected(self) -> bool:
        return self.network.is_up(self.clock.now)

    def exchange(self, request: InferenceRequest, deadline: float) -> Reply | None:
        now = self.clock.now
        wire = encode(request)
        self.sent += 1
        self.bytes_tx += len(wire)
        rtt = self.network.round_trip_s(now, len(wire), self._reply_estimate)
        if rtt is None or now + rtt > deadline:
            self.timed_out += 1
            self.clock.advance_to(deadline)
            return None
        reply = self._answer(request, wire, now + rtt / 2)
        reply_wire = encode(reply)
        self._reply_estimate = len(reply_wire)
        self.bytes_rx += len(reply_wire)
        self.answered += 1
        self.clock.advance_to(now + rtt)
        return reply

    def _answer(self, request: InferenceRequest, wire: bytes, server_now: float) -> Reply:
        key = (request.features, request.mask)
        hit = self._cache.get(key)
        if hit is None and self.rows is not None:
            self._prefetch(request.mask)
            hit = self._cache.get(key)
        if hit is not None and request.bundle_id == hit.bundle_id:
            if isinstance(hit, ValueReply):
                return ValueReply(request.request_id, request.device, hit.bundle_id, hit.value,
                                  hit.model_id, server_now, hit.service_ms)
            return InferenceReply(request.request_id, request.device, hit.bundle_id, hit.label,
                                  hit.probabilities, hit.model_id, server_now, hit.service_ms)
        self.live_calls += 1
        received = decode(wire)
        assert isinstance(received, InferenceRequest)
        reply = self.hpc.handle_batch([received], now=server_now)[0]
        decoded = decode(encode(reply))
        assert isinstance(decoded, InferenceReply | ValueReply | ErrorReply)
        return decoded

    def _prefetch(self, packed_mask: bytes) -> None:
        assert self.rows is not None
        start = self.row_index - self.row_index % self.block
        if (start, packed_mask) in self._fetched:
            return
        self._fetched.add((start, packed_mask))
        n = len(self.manifest.feature_names)
        mask = np.unpackbits(np.frombuffer(packed_mask, np.uint8), count=n,
                             bitorder="little").astype(bool)
        block = np.where(mask, self.rows[start:start + self.block], np.float32(0.0))
        block = np.ascontiguousarray(block, dtype="<f4")
        bundle_id = self.manifest.bundle_id
        requests = [InferenceRequest(i, "sim-prefetch", bundle_id, 0.0, 1e9, row.tobytes(),
                                     packed_mask) for i, row in enumerate(block)]
        for req, reply in zip(requests, self.hpc.handle_batch(requests, now=0.0), strict=True):
            if isinstance(reply, InferenceReply | ValueReply):
                self._cache[(req.features, req.mask)] = reply


def hpc_mask(manifest: Manifest) -> npt.NDArray[np.bool_]:
    """Feature columns the HPC's sensors yield (what an escalation has read at the least)."""
    mask = np.zeros(len(manifest.feature_names), dtype=bool)
    for name in manifest.hpc.sensors:
        mask[list(manifest.sensor(name).features)] = True
    return mask


def hpc_answers(bundle: str | Path | ReplaySession, X: npt.NDArray[np.floating[Any]]
                ) -> npt.NDArray[np.int64]:
    """The always-cloud baseline: the HPC's label for each row (its sensors read), batched;
    a session answers from its cache (the labels ``HpcInference.handle_batch`` gives)."""
    if isinstance(bundle, ReplaySession):
        x = np.ascontiguousarray(X, dtype=np.float32)
        masks = np.broadcast_to(hpc_mask(bundle.manifest), x.shape)
        return bundle.hpc_labels(x, np.arange(len(x)), masks)
    return _hpc_labels_live(bundle, X)


def hpc_values(session: ReplaySession, X: npt.NDArray[np.floating[Any]]
               ) -> npt.NDArray[np.float32]:
    """The always-cloud baseline of a regression bundle: the HPC's value for each row (its
    sensors read), from the session's cache."""
    x = np.ascontiguousarray(X, dtype=np.float32)
    masks = np.broadcast_to(hpc_mask(session.manifest), x.shape)
    return session.hpc_values(x, np.arange(len(x)), masks)


def _hpc_labels_live(bundle: str | Path, X: npt.NDArray[np.floating[Any]]
                     ) -> npt.NDArray[np.int64]:
    """``hpc_answers`` of a bundle directory: the cloud's ``HpcInference`` on every row."""
    manifest = verify(bundle)
    hpc = HpcInference.load(bundle)
    mask = hpc_mask(manifest)
    packed = np.packbits(mask, bitorder="little").tobytes()
    block = np.ascontiguousarray(np.where(mask, X, 0.0), dtype="<f4")
    requests = [InferenceRequest(i, "sim-baseline", manifest.bundle_id, 0.0, 1e9, row.tobytes(),
                                 packed) for i, row in enumerate(block)]
    labels = np.empty(len(X), dtype=np.int64)
    for i, reply in enumerate(hpc.handle_batch(requests, now=0.0)):
        if isinstance(reply, ErrorReply):
            raise RuntimeError(f"the HPC refused row {i}: {reply.code}: {reply.message}")
        if not isinstance(reply, InferenceReply):  # a regression HPC's ValueReply
            raise RuntimeError(f"the HPC answered row {i} with a value, not a class label")
        labels[i] = reply.label
    return labels


def device_seed(seed: int, device: int) -> int:
    return int(np.random.SeedSequence([seed, device]).generate_state(1)[0])


def replay(bundle: str | Path | ReplaySession, X: npt.NDArray[np.floating[Any]],
           y: npt.NDArray[np.integer[Any]], *, scenario: Scenario | None = None,
           operating_point: str | None = None,
           devices: int | None = None, limit: int | None = None, cloud: bool = True,
           prefetch: bool = True, progress: bool = False, batched: bool = True,
           sizes: npt.ArrayLike | None = None) -> RunResult:
    """Replay ``X`` (truth ``y``) through ``devices`` runtimes; every device replays the rows.

    ``bundle``: a bundle directory (verified now) or a ``ReplaySession`` (verified once, its
    sessions and the HPC's cached answers shared by every replay given it).

    ``sizes`` (one per row): each item's size, charged its own cost when the bundle's costs
    grow with it (``EdgeRuntime.predict_row(x, size=)``).
    ``cloud=False`` runs without an uplink (the always-local baseline: the runtime answers
    what it would escalate on its own). ``limit`` caps rows per device. ``batched`` computes
    the same decisions column-wise (``simulator.batch_replay``) when the rows are finite (a
    NaN or infinity is a failed read, which the runtime handles row by row) and ``sizes``, if
    given, are valid; ``batched=False`` drives one ``EdgeRuntime`` row by row.
    """
    scenario = scenario or Scenario()
    session = as_session(bundle)
    manifest = session.manifest
    point = operating_point or scenario.operating_point or manifest.default_operating_point
    n_devices = devices or scenario.devices.count
    n_rows = limit if limit is not None else (scenario.devices.limit or len(X))
    X = np.ascontiguousarray(X[:n_rows], dtype=np.float32)
    y = np.asarray(y[:n_rows])
    item_sizes = None if sizes is None else np.asarray(sizes, dtype=np.float64)[:n_rows]
    if batched and math.isfinite(X.sum(dtype=np.float64)) and (
            item_sizes is None or _valid_sizes(item_sizes, len(X))):
        return replay_batched(session, X, y, scenario=scenario, point=point,
                              n_devices=n_devices, cloud=cloud, sizes=item_sizes)
    hpc = session.hpc_inference() if cloud else None
    period = 1.0 / scenario.devices.rate_hz
    cols = DecisionColumns()
    total = n_devices * len(X)
    bar = _progress(total, progress, f"replay {point}")
    started = time.perf_counter()
    end_time = 0.0
    for d in range(n_devices):
        device_id = f"dev-{d}"
        clock = SimClock()
        uplink = None
        if hpc is not None:
            network = NetworkModel(scenario.network, manifest.link,
                                   seed=device_seed(scenario.seed, d))
            uplink = SimulatedUplink(hpc, network, clock, manifest=manifest,
                                     rows=X if prefetch else None)
        rt = session.runtime(point, uplink=uplink, clock=clock, device_id=device_id)
        _replay_device(rt, uplink, clock, X, y, period, device_id, manifest, cols, item_sizes)
        end_time = max(end_time, clock.now)
        if bar is not None:
            bar.update(len(X))
    if bar is not None:
        bar.close()
    return _run_result(manifest, point, cols, scenario, cloud, end_time, started, n_devices,
                       len(X))


def _valid_sizes(sizes: npt.NDArray[np.float64], n_rows: int) -> bool:
    """One finite size >= 0 per row (else the per-row replay raises the runtime's error)."""
    return len(sizes) >= n_rows and bool(np.isfinite(sizes).all() and (sizes >= 0).all())


def replay_batched(session: ReplaySession, X: npt.NDArray[np.float32],
                   y: npt.NDArray[np.integer[Any]], *, scenario: Scenario, point: str,
                   n_devices: int, cloud: bool,
                   sizes: npt.NDArray[np.float64] | None = None) -> RunResult:
    """``replay``'s decisions, column-wise: one batched walk, then each device's uplink.
    ``sizes``: per row, as ``replay``'s (each item charged at its size; on the wire when the
    HPC's cost grows with it, which a bandwidth limit sees). The HPC's answers come from the
    session's cache (computed for rows it has not answered yet)."""
    started = time.perf_counter()
    manifest = session.manifest
    local = walk_local(session.models, manifest.operating_point(point).policy, X,
                       session.hpc_labels if cloud else _no_hpc,
                       session.hpc_values if cloud else _no_hpc_values)
    period = 1.0 / scenario.devices.rate_hz
    deadline_s = manifest.link.deadline_ms / 1000.0
    escalating = np.flatnonzero(local.escalated)
    costs_at = sizes[:len(X)] if sizes is not None and manifest.size_dependent else None
    size_sent = sizes is not None and any(manifest.sensor(s).size_poly
                                          for s in manifest.hpc.sensors)
    end_time = 0.0
    arrays = []
    for d in range(n_devices):
        network = (NetworkModel(scenario.network, manifest.link,
                                seed=device_seed(scenario.seed, d)) if cloud else None)
        wire = (wire_sizes(manifest, f"dev-{d}", local.local_label[escalating],
                           local.hpc_label[escalating], size_sent,
                           regression=manifest.is_regression)
                if network is not None and network.bytes_per_s > 0.0 else None)
        timeline = escalation_timeline(escalating, period, network, deadline_s, wire)
        arrays.append(device_columns(local, manifest, timeline, period, costs_at))
        ends = [arrays[-1]["t_start"][-1:], timeline.end]
        end_time = max([end_time] + [float(e.max()) for e in ends if e.size])
    cols = column_arrays([f"dev-{d}" for d in range(n_devices)], arrays, y,
                         regression=manifest.is_regression)
    return _run_result(manifest, point, cols, scenario, cloud, end_time, started, n_devices,
                       len(X))


def _no_hpc(X: npt.NDArray[np.float32], rows: npt.NDArray[np.int64],
            masks: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """No uplink: nothing reaches the HPC (its labels are never used)."""
    return np.full(len(rows), -1, dtype=np.int64)


def _no_hpc_values(X: npt.NDArray[np.float32], rows: npt.NDArray[np.int64],
                   masks: npt.NDArray[np.bool_]) -> npt.NDArray[np.float32]:
    """No uplink, a regression bundle: nothing reaches the HPC."""
    return np.full(len(rows), np.nan, dtype=np.float32)


def _run_result(manifest: Manifest, point: str, cols: Any, scenario: Scenario, cloud: bool,
                end_time: float, started: float, n_devices: int, n_rows: int) -> RunResult:
    """The replay's ``RunResult`` (per-row or batched columns alike)."""
    return RunResult(
        mode="replay", bundle_id=manifest.bundle_id, operating_point=point,
        classes=manifest.classes, columns=cols,
        outages=[(o.start_s, o.end_s) for o in scenario.network.outages] if cloud else [],
        duration_s=end_time, wall_s=time.perf_counter() - started,
        extra={"cloud": cloud, "devices": n_devices, "rows_per_device": n_rows},
        regression=manifest.is_regression)


def _replay_device(rt: Any, uplink: SimulatedUplink | None, clock: SimClock,
                   X: npt.NDArray[np.float32],
                   y: npt.NDArray[np.integer[Any]], period: float, device_id: str,
                   manifest: Manifest, cols: DecisionColumns,
                   sizes: npt.NDArray[np.float64] | None = None) -> None:
    sensor_latency = {s.name: s.latency_ms for s in manifest.sensors}
    latency_of: dict[tuple[str, ...], float] = {}
    predict = rt.predict_row
    truth = y.tolist()
    a_device, a_row, a_t, a_lat = (cols.device.append, cols.row.append, cols.t_start.append,
                                   cols.latency_ms.append)
    a_label, a_truth, a_src, a_esc = (cols.label.append, cols.truth.append, cols.source.append,
                                      cols.escalated.append)
    a_sens, a_rid, a_sent = cols.sensors.append, cols.request_id.append, cols.sent.append
    a_energy = cols.energy_mj.append
    regression = manifest.is_regression
    for i in range(len(X)):
        t0 = clock.advance_to(i * period)
        if uplink is not None:
            uplink.row_index = i
        size = None if sizes is None else float(sizes[i])
        decision = predict(X[i], size=size)
        sensors = decision.sensors_read
        wait_ms = (clock.now - t0) * 1000.0
        read_ms = latency_of.get(sensors) if size is None else sum(
            sensor_cost(manifest.sensor(s), manifest.cost_weights, size).latency_ms
            for s in sensors)
        if read_ms is None:
            read_ms = latency_of[sensors] = sum(sensor_latency[s] for s in sensors)
        a_device(device_id)
        a_row(i)
        a_t(t0)
        a_lat(wait_ms + read_ms)
        a_label(int(decision.label_index))
        if regression:  # the decision's value against the row's target
            a_truth(-1)
            cols.value.append(float("nan") if decision.value is None else decision.value)
            cols.target.append(float(truth[i]))
        else:
            a_truth(int(truth[i]))
        a_src(decision.source)
        a_esc(bool(decision.escalated))
        a_sens(sensors)
        rid = decision.request_id
        a_rid(-1 if rid is None else int(rid))
        a_sent(rid is not None)
        a_energy(decision.cost.energy_mj)


def _progress(total: int, enabled: bool, desc: str) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="dec", leave=False)


ClockFn = Callable[[], float]
