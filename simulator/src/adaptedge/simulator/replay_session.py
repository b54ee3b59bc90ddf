"""A replay session: one bundle verified once for many replays (points, baselines, runs).

``ReplaySession(bundle_dir)`` verifies every file hash once, then keeps what replays share:
the batched walk's onnxruntime sessions (``batch_replay.BundleModels``, each file's hash
re-checked when its session is made), the HPC's answers (``hpc_cache.HpcAnswers``: per HPC
file, rows and feature mask; in memory, and on disk under ``<cache_root>/replay`` unless
``disk_cache=False``), the cloud's ``HpcInference`` and the edge runtimes' model store for the
per-row path. ``threads``: how many threads a batched model call on many rows uses (row
chunks, ``row_chunks``; default: the usable cores; 1: one call). Pass it to
``replay.replay`` in place of the bundle directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.cloud import HpcInference
from adaptedge.edge import EdgeRuntime
from adaptedge.edge.policy import ModelStore
from adaptedge.edge.uplink import Uplink
from adaptedge.protocol.bundle import verify
from adaptedge.simulator.batch_replay import BundleModels
from adaptedge.simulator.clock import SimClock
from adaptedge.simulator.hpc_cache import HpcAnswers, rows_digest

CACHE_PART = "replay"
"""The cache subdirectory of the HPC answers (``trainer.data.cache.CACHE_PARTS``)."""


def default_cache_dir() -> Path:
    from adaptedge.trainer.data.cache import cache_root

    return cache_root() / CACHE_PART


class ReplaySession:
    """One verified bundle and what its replays share (not thread-safe)."""

    def __init__(self, bundle_dir: str | Path, *, disk_cache: bool = True,
                 cache_dir: str | Path | None = None, threads: int | None = None) -> None:
        self.root = Path(bundle_dir)
        self.manifest = verify(self.root)
        self.models = BundleModels(self.manifest, self.root, threads=threads)
        hpc_sha256 = self.manifest.files.get(self.manifest.hpc.file)
        directory = (Path(cache_dir) if cache_dir is not None else default_cache_dir()
                     ) if disk_cache and hpc_sha256 else None
        # a bundle without its HPC file is refused when the HPC is first asked (BundleModels)
        self.answers = HpcAnswers(hpc_sha256 or "", self.models.hpc_labels, directory)
        self.value_answers = HpcAnswers(hpc_sha256 or "", self.models.hpc_values, directory,
                                        values=True)
        self._store: ModelStore | None = None
        self._hpc: HpcInference | None = None

    def hpc_labels(self, X: npt.NDArray[np.float32], rows: npt.NDArray[np.int64],
                   masks: npt.NDArray[np.bool_], digest: str | None = None
                   ) -> npt.NDArray[np.int64]:
        """The HPC's label of ``X[rows]``, row ``rows[i]`` measured on columns ``masks[i]``
        ([len(rows), n_features]); computed only for rows no earlier call asked about."""
        out = np.empty(len(rows), dtype=np.int64)
        self._per_mask(X, rows, masks, digest, out, self.answers.labels)
        return out

    def hpc_values(self, X: npt.NDArray[np.float32], rows: npt.NDArray[np.int64],
                   masks: npt.NDArray[np.bool_], digest: str | None = None
                   ) -> npt.NDArray[np.float32]:
        """A regression HPC's value of ``X[rows]`` (as ``hpc_labels``)."""
        out = np.empty(len(rows), dtype=np.float32)
        self._per_mask(X, rows, masks, digest, out, self.value_answers.values)
        return out

    def _per_mask(self, X: npt.NDArray[np.float32], rows: npt.NDArray[np.int64],
                  masks: npt.NDArray[np.bool_], digest: str | None,
                  out: npt.NDArray[Any], answer: Any) -> None:
        """Fill ``out`` with ``answer``'s answers, one call per distinct feature mask."""
        if not len(rows):
            return
        digest = digest or rows_digest(X)
        packed = np.ascontiguousarray(np.packbits(masks, axis=1, bitorder="little"))
        keys = packed.view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
        distinct, first, which = np.unique(keys, return_index=True, return_inverse=True)
        for k in range(len(distinct)):
            pick = np.flatnonzero(which == k)
            out[pick] = answer(X, digest, rows[pick], masks[first[k]])

    def hpc_inference(self) -> HpcInference:
        """The cloud's ``HpcInference`` for the per-row path, loaded on first use."""
        if self._hpc is None:
            self._hpc = HpcInference.load(self.root)
        return self._hpc

    def runtime(self, point: str, *, uplink: Uplink | None, clock: SimClock,
                device_id: str) -> EdgeRuntime:
        """An ``EdgeRuntime`` at ``point`` on the session's verified manifest; every runtime of
        the session shares one model store (sessions made once, each file hash-checked)."""
        if self._store is None:
            self._store = ModelStore(self.manifest, self.root)
        rt = EdgeRuntime(self.manifest, self._store, uplink=uplink, clock=clock,
                         device_id=device_id, sensor_timeouts_ms=None, outbox=None,
                         max_reader_threads=4, request_id_start=1, max_resident_policies=2)
        rt.set_operating_point(point)
        return rt


def as_session(bundle: str | Path | ReplaySession, **kw: Any) -> ReplaySession:
    """``bundle`` if it is a session, else a new session of that bundle directory."""
    return bundle if isinstance(bundle, ReplaySession) else ReplaySession(bundle, **kw)
