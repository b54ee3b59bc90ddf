"""Batched replay: the decisions the per-row replay makes, computed column-wise.

The local walk is ``protocol.walk.walk_manifest`` in float32 (one onnxruntime call per node visit
over all rows there); every device replays the same rows, so it runs once. Per device only the uplink
differs: which escalations find the link up, the network model's draws (``NetworkModel.
take_draws``, the same sequence the per-row calls draw), round trips against the deadline and
the simulated clock they push forward. The clock is vectorised when no exchange outlasts the
gap to the next row; otherwise a loop over the escalations only. Costs are
``protocol.costs.decision_costs`` per distinct (sensors read, sent) set, plus each row's
visited nodes' evaluation energy (``BatchWalk.compute``) as the runtime charges it.

Per-item sizes are charged per row (``batch_sized``); a bandwidth limit takes each message's
wire size (``batch_wire``) on the clock loop. Rows holding NaN or infinity (failed reads) fall
back to the per-row replay (``replay.replay`` decides).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from adaptedge.protocol.costs import cost_columns, decision_costs
from adaptedge.protocol.device_bundle import require_hpc
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import MODEL_INPUT, PROBA_OUTPUT, VALUE_OUTPUT, Manifest
from adaptedge.protocol.model_file import model_bytes
from adaptedge.protocol.walk import ESCALATE, BatchWalk, walk_manifest
from adaptedge.simulator.batch_sized import sized_costs
from adaptedge.simulator.network import NetworkModel
from adaptedge.simulator.records import ColumnArrays
from adaptedge.simulator.row_chunks import CHUNK_ROWS, run_chunked, usable_threads

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
REPLY_ESTIMATE = 96
"""The per-row uplink's reply size estimate before its first reply (``replay.SimulatedUplink``)."""


class BundleModels:
    """onnxruntime sessions (batched calls) for a verified bundle's files, hash-checked; a
    call on many rows runs in row chunks on ``threads`` threads (``row_chunks``: the same
    outputs as one call; default: the usable cores)."""

    def __init__(self, manifest: Manifest, root: Path, *, threads: int | None = None,
                 chunk_rows: int = CHUNK_ROWS) -> None:
        self.manifest = manifest
        self.root = root
        self.threads = usable_threads() if threads is None else max(1, threads)
        self.chunk_rows = chunk_rows
        self._sessions: dict[str, Any] = {}

    def session(self, file: str) -> Any:
        session = self._sessions.get(file)
        if session is None:
            if file == self.manifest.hpc.file:
                require_hpc(self.manifest, self.root, "a replay")
            data = (self.root / file).read_bytes()
            if hashlib.sha256(data).hexdigest() != self.manifest.files[file]:
                raise BundleError("does not match its SHA-256 in the manifest",
                                  path=str(self.root / file))
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            session = ort.InferenceSession(model_bytes(file, data), options,
                                           providers=["CPUExecutionProvider"])
            self._sessions[file] = session
        return session

    def run(self, file: str, x: F32, scores: str | None) -> tuple[F32, F32 | None]:
        """``protocol.walk.RunFile``: the answer (probabilities, or a regression's ``value``)
        and, when asked, output ``scores``."""
        answer = VALUE_OUTPUT if self.manifest.is_regression else PROBA_OUTPUT
        outputs = [answer, scores] if scores else [answer]
        session = self.session(file)

        def call(rows: F32) -> list[F32]:
            return list(session.run(outputs, {MODEL_INPUT: rows}))

        out = run_chunked(call, x, self.threads, self.chunk_rows)
        return out[0], (out[1] if scores else None)

    def hpc_answers(self, x: F32, feature_mask: npt.NDArray[np.bool_]) -> F32:
        """The HPC's answer output per row (probabilities, or a regression's ``value``),
        unmeasured columns (``feature_mask`` False) set to 0."""
        masked = np.where(feature_mask, x, np.float32(0.0))
        return self.run(self.manifest.hpc.file, masked, None)[0]

    def hpc_labels(self, x: F32, feature_mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """The HPC's label per row, unmeasured columns (``feature_mask`` False) set to 0."""
        if not len(x):
            return np.zeros(0, dtype=np.int64)
        return np.asarray(self.hpc_answers(x, feature_mask).argmax(axis=1), dtype=np.int64)

    def hpc_values(self, x: F32, feature_mask: npt.NDArray[np.bool_]) -> F32:
        """A regression HPC's value per row (its ``value`` output), unmeasured columns 0."""
        if not len(x):
            return np.zeros(0, dtype=np.float32)
        return np.asarray(self.hpc_answers(x, feature_mask)[:, 0], dtype=np.float32)


@dataclass(frozen=True)
class LocalWalk:
    """The device-independent part: the walk, the HPC's labels and the sensors tables."""

    walk: BatchWalk
    escalated: npt.NDArray[np.bool_]
    hpc_label: npt.NDArray[np.int64]
    """Per row: the HPC's answer when the escalation is sent (HPC sensors read), else -1."""
    hpc_bits: int
    local_label: npt.NDArray[np.int64]
    """Per row: the final node's own answer (a stop, or an escalation left unanswered)."""
    hpc_value: F32 | None = None
    """A regression walk, per row: the HPC's value when the escalation is sent, else NaN."""

    @property
    def local_value(self) -> F32:
        """A regression walk's own answer per row (the final node's value)."""
        return np.asarray(self.walk.values, dtype=np.float32)


HpcLabels = Callable[[F32, I64, npt.NDArray[np.bool_]], I64]
"""(rows X, escalated row indices, their feature masks [len, n_features]) -> the HPC's labels
(``replay_session.ReplaySession.hpc_labels``: cached per HPC, rows and mask)."""
HpcValues = Callable[[F32, I64, npt.NDArray[np.bool_]], F32]
"""As ``HpcLabels``, a regression HPC's values (``ReplaySession.hpc_values``)."""


def walk_local(models: BundleModels, policy: str, X: F32, hpc: HpcLabels | None = None,
               hpc_values: HpcValues | None = None) -> LocalWalk:
    """Walk every row once, and ask the HPC (``hpc``, default: ``models`` every time; a
    regression bundle's: ``hpc_values``, default ``models``) about the rows that escalate."""
    m = models.manifest
    walk = walk_manifest(m, policy, X, models.run)
    escalated = walk.kind == ESCALATE
    index = {s.name: i for i, s in enumerate(m.sensors)}
    hpc_bits = sum(1 << index[s] for s in m.hpc.sensors)
    hpc_label = np.full(len(X), -1, dtype=np.int64)
    hpc_value = np.full(len(X), np.nan, dtype=np.float32) if m.is_regression else None
    rows = np.flatnonzero(escalated)
    if rows.size:
        node_features = np.zeros((len(walk.node_ids), len(m.feature_names)), dtype=bool)
        for k, bits in enumerate(walk.sensor_bits):  # what a row ending at node k sends
            for i, spec in enumerate(m.sensors):
                if (bits | hpc_bits) >> i & 1:
                    node_features[k, list(spec.features)] = True
        masks = node_features[walk.final[rows]]
        if hpc_value is not None:
            hpc_value[rows] = (hpc_values or _uncached_values(models))(X, rows, masks)
        else:
            hpc_label[rows] = (hpc or _uncached(models))(X, rows, masks)
    return LocalWalk(walk, escalated, hpc_label, hpc_bits, walk.local_label, hpc_value)


def _uncached(models: BundleModels) -> HpcLabels:
    def labels(X: F32, rows: I64, masks: npt.NDArray[np.bool_]) -> I64:
        return models.hpc_labels(X[rows], masks)

    return labels


def _uncached_values(models: BundleModels) -> HpcValues:
    def values(X: F32, rows: I64, masks: npt.NDArray[np.bool_]) -> F32:
        return models.hpc_values(X[rows], masks)

    return values


@dataclass
class Timeline:
    """Per escalated row: when it started, whether it was sent and answered, when it ended."""

    t0: F64
    sent: npt.NDArray[np.bool_]
    answered: npt.NDArray[np.bool_]
    end: F64


def escalation_timeline(rows: npt.NDArray[np.int64], period: float,
                        network: NetworkModel | None, deadline_s: float,
                        wire: tuple[I64, I64] | None = None) -> Timeline:
    """The simulated clock over the escalations at ``rows`` (ascending), as the per-row
    replay moves it: a row starts at ``max(now, row * period)``; an exchange ends at the reply
    or at the deadline (lost, late); nothing is sent while the link is down. ``wire``: per
    escalation, request and reply bytes (``batch_wire.wire_sizes``), needed under a bandwidth
    limit."""
    n = len(rows)
    base = rows.astype(np.float64) * period
    if network is None:
        none = np.zeros(n, dtype=bool)
        return Timeline(base, none, none.copy(), base.copy())
    uniform, normal = network.take_draws(n)
    if network.bytes_per_s > 0.0:
        if wire is None:
            raise ValueError("a bandwidth limit needs the wire sizes of the escalations")
        return _timeline_loop(base, network, uniform, normal, deadline_s, wire)
    fast = _timeline(base, network, uniform, normal, deadline_s)
    prior = np.maximum.accumulate(fast.end)
    if n < 2 or bool((prior[:-1] <= base[1:]).all()):
        return fast  # no exchange outlasts the gap to the next escalation: t0 = row * period
    return _timeline_loop(base, network, uniform, normal, deadline_s)


def _timeline(t0: F64, network: NetworkModel, uniform: list[float], normal: list[float],
              deadline_s: float) -> Timeline:
    up = np.ones(len(t0), dtype=bool)
    for o in network.outages:
        up &= ~((o.start_s <= t0) & (t0 < o.end_s))
    k = int(up.sum())
    rtt = np.full(k, network.median_s)
    if network.sigma > 0.0:
        sigma = network.sigma
        rtt = rtt * np.array([math.exp(sigma * z) for z in normal[:k]], dtype=np.float64)
    lost = (np.asarray(uniform[:k], dtype=np.float64) < network.loss if network.loss > 0.0
            else np.zeros(k, dtype=bool))
    ts = t0[up]
    late = lost | (ts + rtt > ts + deadline_s)
    answered = np.zeros(len(t0), dtype=bool)
    answered[up] = ~late
    end = t0.copy()
    end[up] = np.where(late, np.maximum(ts, ts + deadline_s), ts + rtt)
    return Timeline(t0, up, answered, end)


def _timeline_loop(base: F64, network: NetworkModel, uniform: list[float],
                   normal: list[float], deadline_s: float,
                   wire: tuple[I64, I64] | None = None) -> Timeline:
    """The clock, one escalation after another; with a bandwidth limit each round trip also
    carries its request and the size of the last reply received (the uplink's estimate)."""
    n = len(base)
    t0, end = np.empty(n), np.empty(n)
    sent, answered = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    outages, median, sigma, loss = (network.outages, network.median_s, network.sigma,
                                    network.loss)
    bytes_per_s = network.bytes_per_s if wire is not None else 0.0
    request_bytes: list[int] = wire[0].tolist() if wire is not None else []
    reply_bytes: list[int] = wire[1].tolist() if wire is not None else []
    reply_estimate = REPLY_ESTIMATE
    now, k = 0.0, 0
    for j, start in enumerate(base.tolist()):
        t = now if now > start else start
        t0[j] = t
        if any(o.covers(t) for o in outages):
            end[j] = now = t
            continue
        sent[j] = True
        rtt = median * math.exp(sigma * normal[k]) if sigma > 0.0 else median
        lost = loss > 0.0 and uniform[k] < loss
        k += 1
        if bytes_per_s > 0.0 and not lost:
            rtt += (request_bytes[j] + reply_estimate) / bytes_per_s
        if lost or t + rtt > t + deadline_s:
            deadline = t + deadline_s
            now = deadline if deadline > t else t
        else:
            answered[j] = True
            now = t + rtt
            if bytes_per_s > 0.0:
                reply_estimate = reply_bytes[j]
        end[j] = now
    return Timeline(t0, sent, answered, end)


def device_columns(local: LocalWalk, manifest: Manifest, timeline: Timeline,
                   period: float, sizes: F64 | None = None) -> dict[str, npt.NDArray[Any]]:
    """One device's decisions as arrays (``DecisionColumns`` fields but ``device``);
    ``sizes``: each item's size, charged its own cost (a size-dependent bundle)."""
    walk, esc = local.walk, local.escalated
    n = len(esc)
    rows = np.flatnonzero(esc)
    t_start = np.arange(n, dtype=np.float64) * period
    wait_ms = np.zeros(n)
    sent = np.zeros(n, dtype=bool)
    answered = np.zeros(n, dtype=bool)
    request_id = np.full(n, -1, dtype=np.int64)
    if rows.size:
        end_at = np.zeros(n)
        end_at[rows] = timeline.end
        np.maximum(t_start[1:], np.maximum.accumulate(end_at)[:-1], out=t_start[1:])
        wait_ms[rows] = (timeline.end - timeline.t0) * 1000.0
        sent[rows] = timeline.sent
        answered[rows] = timeline.answered
        request_id[rows] = np.where(timeline.sent, np.arange(1, len(rows) + 1), -1)
    key = walk.trail * 2 + sent
    present = np.zeros(2 * len(walk.trails), dtype=bool)
    present[key] = True
    keys = np.flatnonzero(present)
    slot = np.zeros(len(present), dtype=np.int64)
    slot[keys] = np.arange(len(keys))
    inverse = slot[key]
    sensors, read_ms, energy = _sensor_tables(local, manifest, keys)
    read_ms, energy = read_ms[inverse], energy[inverse]
    if sizes is not None:
        read_ms, energy = sized_costs(manifest, sensors, keys, inverse, sizes)
    if walk.compute is not None:  # the models' evaluation energy (``protocol.costs``)
        energy = energy + walk.compute[:, 1]
    if local.hpc_value is not None:  # regression: a value per row, no label
        value = np.where(answered, local.hpc_value, local.local_value).astype(np.float64)
        label = np.full(n, -1, dtype=np.int64)
    else:
        value, label = np.zeros(0), np.where(answered, local.hpc_label, local.local_label)
    return {
        "row": np.arange(n), "t_start": t_start, "latency_ms": wait_ms + read_ms,
        "label": label,
        "source": SOURCE_NAMES[np.where(answered, 2, esc.view(np.int8))],
        "escalated": esc, "sensors": sensors[inverse], "request_id": request_id, "sent": sent,
        "energy_mj": energy, "value": value}


SOURCE_NAMES = np.array(["local", "degraded", "cloud"], dtype=object)


def _sensor_tables(local: LocalWalk, manifest: Manifest, keys: npt.NDArray[np.int64]
                   ) -> tuple[npt.NDArray[np.object_], F64, F64]:
    """Per cost key (trail * 2 + sent): sensors in reading order, read latency, energy."""
    names = [s.name for s in manifest.sensors]
    latency = {s.name: s.latency_ms for s in manifest.sensors}
    hpc = [names.index(s) for s in manifest.hpc.sensors]
    per_sensor, link = cost_columns(manifest.sensors, manifest.link, manifest.cost_weights)
    sensors = np.empty(len(keys), dtype=object)
    read_ms = np.empty(len(keys))
    masks = np.zeros((len(keys), len(names)), dtype=bool)
    for j, key in enumerate(keys.tolist()):
        order = list(local.walk.trails[key >> 1])
        if key & 1:
            order += [s for s in hpc if s not in order]
        masks[j, order] = True
        sensors[j] = tuple(names[s] for s in order)
        read_ms[j] = sum(latency[s] for s in sensors[j])  # in reading order, as the replay
    costs = decision_costs(masks, keys & 1, per_sensor, link)
    return sensors, read_ms, np.ascontiguousarray(costs[:, 1])


def column_arrays(devices: list[str], arrays: list[dict[str, npt.NDArray[Any]]],
                  truth: npt.NDArray[Any], regression: bool = False) -> ColumnArrays:
    """The devices' decisions, device after device, as one ``ColumnArrays``; ``regression``:
    ``truth`` holds the targets (``target``; ``truth`` and ``label`` are then -1)."""
    def joined(name: str) -> npt.NDArray[Any]:
        return arrays[0][name] if len(arrays) == 1 else np.concatenate([a[name] for a in arrays])

    n = len(truth)
    labels = (np.full(n, -1, dtype=np.int64) if regression
              else np.asarray(truth).astype(np.int64))
    return ColumnArrays(
        device=np.repeat(np.array(devices, dtype=object), n),
        row=joined("row"), t_start=joined("t_start"), latency_ms=joined("latency_ms"),
        label=joined("label"), truth=np.tile(labels, len(devices)),
        source=joined("source"), escalated=joined("escalated"), sent=joined("sent"),
        sensors=joined("sensors"), energy_mj=joined("energy_mj"),
        request_id=joined("request_id"),
        value=joined("value") if regression else np.zeros(0),
        target=(np.tile(np.asarray(truth, dtype=np.float64), len(devices)) if regression
                else np.zeros(0)))
