"""Replay: the real ``EdgeRuntime`` over a dataset split, with a simulated clock and the
cloud's real ``HpcInference`` in-process behind a simulated uplink (no broker).

Every escalation is encoded and decoded with the wire codec, goes through the network
model (outages, loss, round trip, bandwidth) and, if it arrives before the deadline, is
answered by ``HpcInference.handle_batch``. The clock only moves forward by simulated
amounts (arrivals at ``rate_hz``, round trips, deadlines): no real sleeps.

Speed: HPC answers for the rows are computed in one batch up front (``prefetch``) and used
only when the request the runtime sends carries exactly the features and mask the batch
used, so the answer is the one ``handle_batch`` would give for that request; any other
request is answered by a live call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from protocol.bundle import verify
from protocol.codec import decode, encode
from protocol.features import pack_features
from protocol.manifest import Manifest
from protocol.messages import ErrorReply, InferenceReply, InferenceRequest
from simulator.clock import SimClock
from simulator.integration import edge_runtime_class, hpc_inference_class
from simulator.network import NetworkModel
from simulator.records import DecisionColumns, RunResult
from simulator.scenario import Scenario

Reply = InferenceReply | ErrorReply


class SimulatedUplink:
    """The edge's ``Uplink`` over the network model and an in-process ``HpcInference``."""

    def __init__(self, hpc: Any, network: NetworkModel, clock: SimClock,
                 prefetched: dict[tuple[bytes, bytes], InferenceReply] | None = None) -> None:
        self.hpc = hpc
        self.network = network
        self.clock = clock
        self.prefetched = prefetched or {}
        self.sent = self.answered = self.timed_out = 0
        self.bytes_tx = self.bytes_rx = 0
        self._reply_estimate = 96

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
        received = decode(wire)
        assert isinstance(received, InferenceRequest)
        reply = self._answer(received, now + rtt / 2)
        reply_wire = encode(reply)
        self._reply_estimate = len(reply_wire)
        self.bytes_rx += len(reply_wire)
        self.answered += 1
        self.clock.advance_to(now + rtt)
        answer = decode(reply_wire)
        assert isinstance(answer, InferenceReply | ErrorReply)
        return answer

    def _answer(self, request: InferenceRequest, server_now: float) -> Reply:
        hit = self.prefetched.get((request.features, request.mask))
        if hit is not None and hit.bundle_id == request.bundle_id:
            return replace(hit, request_id=request.request_id, device=request.device,
                           server_time=server_now)
        replies = self.hpc.handle_batch([request], now=server_now)
        return replies[0]  # type: ignore[no-any-return]


def hpc_mask(manifest: Manifest) -> npt.NDArray[np.bool_]:
    """Feature columns the HPC's sensors yield (what an escalation has read at the least)."""
    mask = np.zeros(len(manifest.feature_names), dtype=bool)
    for name in manifest.hpc.sensors:
        mask[list(manifest.sensor(name).features)] = True
    return mask


def prefetch_hpc(hpc: Any, manifest: Manifest, X: npt.NDArray[np.floating[Any]],
                 masks: list[npt.NDArray[np.bool_]]) -> dict[tuple[bytes, bytes], InferenceReply]:
    """HPC replies for every row under each candidate mask, computed in one batch per mask."""
    out: dict[tuple[bytes, bytes], InferenceReply] = {}
    for mask in masks:
        requests = []
        for i, row in enumerate(X):
            features, packed = pack_features(row, mask)
            requests.append(InferenceRequest(
                request_id=i, device="sim-prefetch", bundle_id=manifest.bundle_id, sent_at=0.0,
                deadline_ms=1e9, features=features, mask=packed))
        for request, reply in zip(requests, hpc.handle_batch(requests, now=0.0), strict=True):
            if isinstance(reply, InferenceReply):
                out[(request.features, request.mask)] = reply
    return out


def hpc_answers(bundle_dir: str | Path, X: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.int64]:
    """The always-cloud baseline: the HPC's label for each row (its sensors read), batched."""
    manifest = verify(bundle_dir)
    hpc = hpc_inference_class().load(bundle_dir)
    replies = prefetch_hpc(hpc, manifest, X, [hpc_mask(manifest)])
    mask = hpc_mask(manifest)
    labels = np.empty(len(X), dtype=np.int64)
    for i, row in enumerate(X):
        labels[i] = replies[pack_features(row, mask)].label
    return labels


def device_seed(seed: int, device: int) -> int:
    return int(np.random.SeedSequence([seed, device]).generate_state(1)[0])


def replay(bundle_dir: str | Path, X: npt.NDArray[np.floating[Any]],
           y: npt.NDArray[np.integer[Any]], *, scenario: Scenario | None = None,
           operating_point: str | None = None,
           devices: int | None = None, limit: int | None = None, cloud: bool = True,
           prefetch: bool = True, progress: bool = False) -> RunResult:
    """Replay ``X`` (truth ``y``) through ``devices`` runtimes; every device replays the rows.

    ``cloud=False`` runs without an uplink (the always-local baseline: the runtime answers
    what it would escalate on its own). ``limit`` caps rows per device.
    """
    scenario = scenario or Scenario()
    manifest = verify(bundle_dir)
    point = operating_point or scenario.operating_point or manifest.default_operating_point
    n_devices = devices or scenario.devices.count
    n_rows = limit if limit is not None else (scenario.devices.limit or len(X))
    X = np.ascontiguousarray(X[:n_rows], dtype=np.float32)
    y = np.asarray(y[:n_rows])
    runtime_cls = edge_runtime_class()
    hpc = hpc_inference_class().load(bundle_dir) if cloud else None
    prefetched = (prefetch_hpc(hpc, manifest, X, [hpc_mask(manifest)])
                  if cloud and prefetch else {})
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
            uplink = SimulatedUplink(hpc, network, clock, prefetched)
        rt = runtime_cls.load(bundle_dir, uplink=uplink, operating_point=point, clock=clock,
                              device_id=device_id)
        _replay_device(rt, clock, X, y, period, device_id, manifest, cols)
        end_time = max(end_time, clock.now)
        if bar is not None:
            bar.update(len(X))
    if bar is not None:
        bar.close()
    return RunResult(
        mode="replay", bundle_id=manifest.bundle_id, operating_point=point,
        classes=manifest.classes, columns=cols,
        outages=[(o.start_s, o.end_s) for o in scenario.network.outages] if cloud else [],
        duration_s=end_time, wall_s=time.perf_counter() - started,
        extra={"cloud": cloud, "devices": n_devices, "rows_per_device": len(X)})


def _replay_device(rt: Any, clock: SimClock, X: npt.NDArray[np.float32],
                   y: npt.NDArray[np.integer[Any]], period: float, device_id: str,
                   manifest: Manifest, cols: DecisionColumns) -> None:
    sensor_latency = {s.name: s.latency_ms for s in manifest.sensors}
    predict = rt.predict_row
    truth = y.tolist()
    a_device, a_row, a_t, a_lat = (cols.device.append, cols.row.append, cols.t_start.append,
                                   cols.latency_ms.append)
    a_label, a_truth, a_src, a_esc = (cols.label.append, cols.truth.append, cols.source.append,
                                      cols.escalated.append)
    a_sens, a_rid = cols.sensors.append, cols.request_id.append
    for i in range(len(X)):
        t0 = i * period
        clock.advance_to(t0)
        t0 = clock.now
        decision = predict(X[i])
        sensors = tuple(decision.sensors_read)
        wait_ms = (clock.now - t0) * 1000.0
        a_device(device_id)
        a_row(i)
        a_t(t0)
        a_lat(wait_ms + sum(sensor_latency[s] for s in sensors))
        a_label(int(decision.label_index))
        a_truth(int(truth[i]))
        a_src(decision.source)
        a_esc(bool(decision.escalated))
        a_sens(sensors)
        rid = decision.request_id
        a_rid(-1 if rid is None else int(rid))


def _progress(total: int, enabled: bool, desc: str) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="dec", leave=False)


ClockFn = Callable[[], float]
