"""The HPC of one bundle behind the wire protocol: validate, one onnxruntime call per batch.

Transport-free: the MQTT service and the in-process simulator both use ``HpcInference``.
Bad input never raises; it becomes an ``ErrorReply`` with a ``protocol.errors`` code, and
``error_counts`` counts it. A regression bundle's HPC gives ``value`` [N, 1] and each answer
is a ``ValueReply``; a non-finite value is an ``internal`` error reply, never an answer.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.service.guard import (
    DEFAULT_RUN_LIMIT_S,
    RunGuard,
    RunTimeout,
    use_capped_arena,
)
from adaptedge.cloud.service.salvage import salvage_request_id
from adaptedge.cloud.service.single_row import BoundRow, first_argmax
from adaptedge.protocol import errors as E
from adaptedge.protocol.bundle import verify
from adaptedge.protocol.codec import decode, encode
from adaptedge.protocol.device_bundle import check_answers_for, device_manifest
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.features import all_finite
from adaptedge.protocol.manifest import MODEL_INPUT, PROBA_OUTPUT, VALUE_OUTPUT, Manifest
from adaptedge.protocol.messages import (
    MAX_TEXT_CHARS,
    ErrorReply,
    InferenceReply,
    InferenceRequest,
    ValueReply,
)
from adaptedge.protocol.messages import Reply as Reply  # re-exported: the service's replies
from adaptedge.protocol.topics import DEFAULT_PREFIX, parse, reply_topic

_TOPIC_CACHE_LIMIT: Final = 65_536
_MAX_ROW_TIMEOUTS: Final = 2
"""Row re-runs of a failed batch that may time out before the rest are failed unrun."""
_LITTLE_ENDIAN: Final = sys.byteorder == "little"


def session_options() -> ort.SessionOptions:
    """One thread: as fast or faster for the small batches a cloud worker sees, and a
    worker per core scales out instead. Allocations come from the capped arena (``guard``)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    use_capped_arena(opts)
    return opts


class HpcInference:
    """Answers ``InferenceRequest``s for one verified bundle with its HPC model."""

    def __init__(self, manifest: Manifest, session: ort.InferenceSession, *,
                 prefix: str = DEFAULT_PREFIX, run_limit_s: float = DEFAULT_RUN_LIMIT_S) -> None:
        self.manifest = manifest
        self.bundle_id = manifest.bundle_id
        self._devices: dict[str, Manifest] = {}
        """The device bundles answered with this HPC (``answer_for``), by id."""
        if manifest.carries_hpc:  # its own all-points device bundle, as train and OTA cut it
            every = device_manifest(manifest)
            self._devices[every.bundle_id] = every
        self._ids = {manifest.bundle_id, *self._devices}
        self.model_id = f"{manifest.bundle_id}/{manifest.hpc.file}"
        self.prefix = prefix
        self.n_features = len(manifest.feature_names)
        self.regression = manifest.is_regression
        self.output = hpc_output(manifest)
        self.n_classes = 1 if self.regression else len(manifest.classes)
        """Columns of the HPC's answer (a regression HPC's ``value``: one)."""
        self._mask_len = (self.n_features + 7) >> 3
        self._session = session
        # The pybind session's run skips the Python wrapper's per-call checks (~4 us);
        # inputs are always float32 [N, n_features] here.
        self._run_session = getattr(getattr(session, "_sess", None), "run", None) or session.run
        self._outputs = [self.output]
        self.guard = RunGuard(run_limit_s)
        self._bound_row = BoundRow(session, self.n_features, self.n_classes, self.guard,
                                   self.output)
        needed = sorted({c for s in manifest.sensors if s.name in manifest.hpc.sensors
                         for c in s.features})
        self.hpc_features: npt.NDArray[np.intp] = np.asarray(needed, dtype=np.intp)
        full = np.ones(self.n_features, dtype=bool)
        self._full_mask = np.packbits(full, bitorder="little").tobytes()
        self._topics: dict[str, tuple[str, str] | None] = {}
        self.error_counts: Counter[str] = Counter()
        self.answered = 0
        self.batches = 0

    @classmethod
    def load(cls, bundle_dir: str | os.PathLike[str], *, prefix: str = DEFAULT_PREFIX,
             run_limit_s: float = DEFAULT_RUN_LIMIT_S,
             trust: Sequence[str | os.PathLike[str]] | None = None) -> HpcInference:
        """Verify the bundle's hashes (and, with ``trust`` public keys, that one of them signed
        it), open one onnxruntime session for its HPC and probe it once (a model that cannot
        answer one row within ``run_limit_s`` is refused)."""
        manifest = verify(bundle_dir, trust=trust)
        if not manifest.carries_hpc:
            raise CloudError(f"{bundle_dir}: is a device bundle: it names its HPC (cloud bundle "
                             f"{manifest.hpc.cloud_bundle}) but does not hold it; serve it with "
                             "its cloud bundle: --bundle CLOUD --bundle DEVICE")
        path = Path(bundle_dir) / manifest.hpc.file
        try:
            session = ort.InferenceSession(str(path), sess_options=session_options(),
                                           providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own unrelated exception types
            raise CloudError(f"{path}: onnxruntime cannot load the HPC model ({exc}); "
                             "re-export the bundle with a supported IR version and opset") from exc
        inputs = {i.name: i for i in session.get_inputs()}
        outputs = {o.name for o in session.get_outputs()}
        output = hpc_output(manifest)
        if MODEL_INPUT not in inputs or output not in outputs:
            raise CloudError(f"{path}: the HPC must take input {MODEL_INPUT!r} and give output "
                             f"{output!r}; it has inputs {sorted(inputs)} and outputs "
                             f"{sorted(outputs)}")
        width = inputs[MODEL_INPUT].shape[-1] if inputs[MODEL_INPUT].shape else None
        if isinstance(width, int) and width != len(manifest.feature_names):
            raise CloudError(f"{path}: the HPC takes {width} features but the manifest lists "
                             f"{len(manifest.feature_names)}")
        inference = cls(manifest, session, prefix=prefix, run_limit_s=run_limit_s)
        inference.probe(path)
        return inference

    def probe(self, path: Path) -> None:
        """Run one row within the time limit; ``CloudError`` if the model cannot."""
        if not self.guard.terminated:
            row = np.linspace(-1.0, 1.0, self.n_features, dtype=np.float32).reshape(1, -1)
            with contextlib.suppress(Exception):  # only a hang refuses a model here
                self._run(row)
        if self.guard.terminated:
            self.guard.close()
            raise CloudError(f"{path}: the HPC model did not answer one row within "
                             f"{self.guard.limit_s:g} s (a huge Loop or a hostile graph?); "
                             "re-export the bundle")

    @property
    def bundle_ids(self) -> tuple[str, ...]:
        """The bundles this worker answers: this one and the device bundles cut from it (more
        in a ``BundlePool``)."""
        return (self.bundle_id, *sorted(self._ids - {self.bundle_id}))

    def serves(self, bundle_id: str) -> bool:
        return bundle_id in self._ids

    def answer_for(self, device: Manifest) -> None:
        """Answer the requests of device bundle ``device`` too; ``BundleError`` (one line) when
        it names another HPC or another request layout (``device_bundle.check_answers_for``)."""
        check_answers_for(self.manifest, device)
        self._devices[device.bundle_id] = device
        self._ids.add(device.bundle_id)

    def manifest_of(self, bundle_id: str) -> Manifest | None:
        """The manifest a device running ``bundle_id`` holds (its points are the ones its
        records number), or None if not answered here."""
        return self.manifest if bundle_id == self.bundle_id else self._devices.get(bundle_id)

    # -- one message (decode, validate, answer) ------------------------------------------------
    def handle_payload(self, topic: str, payload: bytes, now: float | None = None
                       ) -> tuple[str, bytes] | None:
        """Answer one raw message: ``(reply topic, encoded reply)``, or ``None`` when the topic
        is not a device's request topic (nobody to answer)."""
        prepared = self.prepare(topic, payload, now)
        if prepared is None:
            return None
        reply_to, item = prepared
        reply = item if isinstance(item, ErrorReply) else self.handle_batch([item], now)[0]
        return reply_to, encode(reply)

    def reply_topic_for(self, topic: str) -> tuple[str, str] | None:
        """``(device, reply topic)`` of a request topic, or ``None`` if it is not one (cached)."""
        cached = self._topics.get(topic, False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        try:
            parsed = parse(topic, self.prefix)
            result = (parsed.device, reply_topic(parsed.device, self.prefix)) \
                if parsed.channel == "req" else None
        except ProtocolError:
            result = None
        if len(self._topics) >= _TOPIC_CACHE_LIMIT:
            self._topics.clear()
        self._topics[topic] = result
        return result

    def prepare(self, topic: str, payload: bytes | bytearray, now: float | None = None
                ) -> tuple[str, InferenceRequest | ErrorReply] | None:
        """Decode one message: the reply topic and either the request or the error to send."""
        try:
            route = self._topics[topic]
        except KeyError:
            route = self.reply_topic_for(topic)
        if route is None:
            self.error_counts[E.BAD_TOPIC] += 1
            return None
        device, reply_to = route
        try:
            message = decode(payload)
        except ProtocolError as exc:
            rid = salvage_request_id(payload, exc.code, device)
            return reply_to, self.error(device, rid, exc.code, exc.message, now)
        if type(message) is not InferenceRequest:
            return reply_to, self.error(device, None, E.BAD_TYPE,
                                        f"expected an inference request on {topic}, got a "
                                        f"{type(message).__name__}", now)
        if message.device != device:
            return reply_to, self.error(device, message.request_id, E.BAD_TOPIC,
                                        f"request names device {message.device!r} but was "
                                        f"published on {topic}: publish on your own request topic",
                                        now)
        return reply_to, message

    def error(self, device: str, request_id: int | None, code: str, message: str,
              now: float | None = None) -> ErrorReply:
        """An error reply, counted under its code."""
        self.error_counts[code] += 1
        if len(message) > MAX_TEXT_CHARS:
            message = message[: MAX_TEXT_CHARS - 3] + "..."
        return ErrorReply(request_id, device, code, message, time.time() if now is None else now)

    # -- a batch --------------------------------------------------------------------------------
    def handle_batch(self, requests: Sequence[InferenceRequest], now: float | None = None
                     ) -> list[Reply]:
        """Validate every request and answer the valid ones with ONE onnxruntime call.

        Replies come back in request order; ``service_ms`` is this call's duration.
        """
        started = time.perf_counter()
        server_time = time.time() if now is None else now
        replies: list[Reply | None] = [None] * len(requests)
        rows: list[int] = []
        ids, n_bytes, full = self._ids, 4 * self.n_features, self._full_mask
        mask_len, all_full = self._mask_len, True
        for i, req in enumerate(requests):
            if req.bundle_id in ids and len(req.features) == n_bytes:
                mask = req.mask
                if mask == full:
                    rows.append(i)
                    continue
                if len(mask) == mask_len:
                    rows.append(i)
                    all_full = False
                    continue
            code, text = self._shape_problem(req)
            replies[i] = self.error(req.device, req.request_id, code, text, server_time)
        if rows:
            self._infer(requests, rows, replies, server_time, started, all_full)
        return replies  # type: ignore[return-value]

    def _shape_problem(self, req: InferenceRequest) -> tuple[str, str]:
        """Why a request of another bundle or feature layout is refused."""
        if req.bundle_id not in self._ids:
            return (E.UNKNOWN_BUNDLE, f"this worker serves bundle {self.bundle_id}, not "
                    f"{req.bundle_id!r}: update the device's bundle or route it to a matching "
                    "worker")
        return (E.BAD_FEATURES, f"bundle {self.bundle_id} has {self.n_features} features "
                f"({self._mask_len} mask bytes); the request carries {len(req.features) / 4:g} "
                f"feature values and {len(req.mask)} mask bytes")

    def _infer(self, requests: Sequence[InferenceRequest], rows: list[int],
               replies: list[Reply | None], server_time: float, started: float,
               all_full: bool) -> None:
        """``all_full``: every row's mask is the full mask."""
        if len(rows) == 1 and all_full and self._infer_one(requests[rows[0]], rows[0], replies,
                                                           server_time, started):
            return
        prepared = self._valid_rows(requests, rows, replies, server_time, all_full)
        if prepared is None:
            return
        rows, x = prepared
        try:
            probs, raw = self._run(x)  # float32, C-contiguous: frombuffer, where or a row mask
        except Exception as exc:
            if len(rows) == 1:
                replies[rows[0]] = self._failure(requests[rows[0]], exc, server_time)
            else:
                self._isolate(requests, rows, x, replies, server_time, started, exc)
            return
        self._answer(requests, rows, probs, raw, replies, server_time, started)

    def _valid_rows(self, requests: Sequence[InferenceRequest], rows: list[int],
                    replies: list[Reply | None], server_time: float, all_full: bool
                    ) -> tuple[list[int], npt.NDArray[np.float32]] | None:
        """The rows the HPC can take and their input matrix; the rest get error replies."""
        n = self.n_features
        data = requests[rows[0]].features if len(rows) == 1 else \
            b"".join([requests[i].features for i in rows])
        x = np.frombuffer(data, dtype="<f4").reshape(len(rows), n)
        if not _LITTLE_ENDIAN:
            x = x.astype(np.float32)  # onnxruntime wants native byte order
        measured: npt.NDArray[np.bool_] | None = None
        has_hpc: npt.NDArray[np.bool_] | None = None
        if all_full:
            keep = None if all_finite(data) else np.isfinite(x).all(axis=1)
        else:
            masks = np.frombuffer(b"".join([requests[i].mask for i in rows]), dtype=np.uint8)
            measured = np.unpackbits(masks.reshape(len(rows), -1), axis=1, count=n,
                                     bitorder="little").astype(bool)
            has_hpc = np.asarray(measured[:, self.hpc_features].all(axis=1))
            keep = has_hpc & ~(~np.isfinite(x) & measured).any(axis=1)
            if keep.all():
                keep = None
        if keep is not None:
            self._reject(requests, rows, replies, keep, has_hpc, server_time)
            rows = [r for r, k in zip(rows, keep.tolist(), strict=True) if k]
            if not rows:
                return None
            x = x[keep]
            measured = None if measured is None else measured[keep]
        if measured is not None:
            x = np.where(measured, x, np.float32(0.0))  # unmeasured slots are 0 for the HPC
        return rows, x

    def _isolate(self, requests: Sequence[InferenceRequest], rows: list[int],
                 x: npt.NDArray[np.float32], replies: list[Reply | None], server_time: float,
                 started: float, batch_error: Exception) -> None:
        """The batch failed: run its rows one by one so only the offending rows get the error.
        Bounded: after ``_MAX_ROW_TIMEOUTS`` rows also ran out of time, the model is hostile
        for every input and the rows left get ``internal`` without another run."""
        timeouts = 0
        for j, i in enumerate(rows):
            if timeouts >= _MAX_ROW_TIMEOUTS:
                replies[i] = self._failure(requests[i], batch_error, server_time)
                continue
            try:
                probs, raw = self._run(x[j:j + 1])
            except Exception as exc:
                timeouts += isinstance(exc, RunTimeout)
                replies[i] = self._failure(requests[i], exc, server_time)
                continue
            self._answer(requests, [i], probs, raw, replies, server_time, started)

    def _failure(self, req: InferenceRequest, exc: Exception, server_time: float) -> ErrorReply:
        return self.error(req.device, req.request_id, E.INTERNAL,
                          f"the HPC failed on this request ({type(exc).__name__}: "
                          f"{str(exc)[:200]})", server_time)

    def _answer(self, requests: Sequence[InferenceRequest], rows: list[int],
                probs: npt.NDArray[np.float32], raw: bytes, replies: list[Reply | None],
                server_time: float, started: float) -> None:
        """``raw``: ``probs`` as bytes (slicing bytes beats numpy rows)."""
        service_ms = (time.perf_counter() - started) * 1000.0
        if self.regression:
            values = probs[:, 0].tolist()
            for j, i in enumerate(rows):
                req = requests[i]
                replies[i] = ValueReply(req.request_id, req.device, req.bundle_id, values[j],
                                        self.model_id, server_time, service_ms)
            self.answered += len(rows)
            self.batches += 1
            return
        labels = probs.argmax(axis=1).tolist()  # the first highest probability wins
        model_id, width, reply = self.model_id, 4 * self.n_classes, InferenceReply
        end = 0
        for j, i in enumerate(rows):
            req, start = requests[i], end
            end += width
            replies[i] = reply(req.request_id, req.device, req.bundle_id, labels[j], raw[start:end],
                               model_id, server_time, service_ms)
        self.answered += len(rows)
        self.batches += 1

    def answer_one(self, req: InferenceRequest) -> Reply | None:
        """A lone request of this bundle's layout, fully measured, through the bound row (the
        latency path); ``None``: it needs ``handle_batch`` (which then reports any problem)."""
        if req.bundle_id not in self._ids or len(req.features) != 4 * self.n_features \
                or req.mask != self._full_mask:
            return None
        return self._bound_reply(req, time.time(), time.perf_counter())

    def _infer_one(self, req: InferenceRequest, index: int, replies: list[Reply | None],
                   server_time: float, started: float) -> bool:
        """The latency path for a lone, fully measured request; False: use the batch path."""
        if req.mask != self._full_mask:
            return False
        reply = self._bound_reply(req, server_time, started)
        if reply is None:
            return False
        replies[index] = reply
        return True

    def _bound_reply(self, req: InferenceRequest, server_time: float, started: float
                     ) -> Reply | None:
        raw = self._bound_row.run(req.features)
        if raw is None:
            if not self.guard.expired:
                return None  # the batch path serves (or reports) it
            return self._failure(req, RunTimeout(
                f"the HPC run was stopped after {self.guard.limit_s:g} s"), server_time)
        self.answered += 1
        self.batches += 1
        service_ms = (time.perf_counter() - started) * 1000.0
        if self.regression:  # BoundRow gave a finite float32
            return ValueReply(req.request_id, req.device, req.bundle_id,
                              memoryview(raw).cast("f")[0], self.model_id, server_time,
                              service_ms)
        return InferenceReply(req.request_id, req.device, req.bundle_id, first_argmax(raw), raw,
                              self.model_id, server_time, service_ms)

    def _run(self, x: npt.NDArray[np.float32]) -> tuple[npt.NDArray[np.float32], bytes]:
        """The probabilities (regression: values, [N, 1]) of the rows of ``x``, as an array
        and as bytes; ``ValueError`` for another shape or a non-finite number."""
        guard = self.guard
        try:
            out: Any = self._run_session(self._outputs, {MODEL_INPUT: x}, guard.begin())[0]
        except Exception:
            guard.end()
            if guard.expired:
                raise RunTimeout(f"the HPC run was stopped after {guard.limit_s:g} s") from None
            raise
        guard.end()  # a run terminated just as it finished still gave its result
        probs = np.asarray(out, dtype="<f4")
        raw = probs.tobytes()
        if probs.shape != (x.shape[0], self.n_classes) or not all_finite(raw):
            raise ValueError(f"HPC returned {self.output} of shape {probs.shape} (or non-finite "
                             f"values); expected ({x.shape[0]}, {self.n_classes}) finite")
        return probs, raw

    def _reject(self, requests: Sequence[InferenceRequest], rows: list[int],
                replies: list[Reply | None], keep: npt.NDArray[np.bool_],
                has_hpc: npt.NDArray[np.bool_] | None, server_time: float) -> None:
        needed = [self.manifest.feature_names[c] for c in self.hpc_features.tolist()]
        for j in np.flatnonzero(~keep).tolist():
            req = requests[rows[j]]
            if has_hpc is not None and not has_hpc[j]:
                code, text = E.MISSING_FEATURES, (
                    f"the HPC needs sensors {list(self.manifest.hpc.sensors)} (features "
                    f"{needed[:8]}{'...' if len(needed) > 8 else ''}) measured; read them "
                    "before escalating")
            else:
                code, text = E.NON_FINITE, ("measured feature values are NaN or infinite: mark a "
                                            "failed sensor as unmeasured instead")
            replies[rows[j]] = self.error(req.device, req.request_id, code, text, server_time)


def hpc_output(manifest: Manifest) -> str:
    """The HPC's answer tensor: ``value`` for a regression bundle, else ``probabilities``."""
    return VALUE_OUTPUT if manifest.is_regression else PROBA_OUTPUT
