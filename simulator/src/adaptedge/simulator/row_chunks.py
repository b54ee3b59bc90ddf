"""One model call over many rows, split into row chunks run on several threads.

onnxruntime releases the GIL in ``run`` and one ``InferenceSession`` may be run from several
threads at once, so a batch of rows split into chunks runs on all the cores while each session
keeps one intra-op thread. Every row is still computed alone, in the session's own order of
operations (a tree ensemble sums its trees per row in the same order), so the outputs equal one
call's bit for bit; splitting the trees across threads (onnxruntime's own intra-op
parallelism on small batches) would not guarantee that.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from itertools import pairwise

import numpy as np
import numpy.typing as npt

CHUNK_ROWS = 8192
"""The fewest rows worth a chunk of their own (below it a thread costs more than it saves)."""
CHUNKS_PER_THREAD = 4
"""Chunks per thread: a thread slowed by other jobs on a shared machine holds up less."""

Arrays = Sequence[npt.NDArray[np.float32]]


def usable_threads() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        with suppress(OSError):
            return max(1, len(affinity(0)))
    return max(1, os.cpu_count() or 1)


def chunk_bounds(n_rows: int, threads: int, chunk_rows: int = CHUNK_ROWS) -> list[int]:
    """Row offsets ``[0, ..., n_rows]`` of near-equal chunks: one chunk when ``threads`` is 1 or
    there are fewer than two chunks' worth of rows, else at most ``CHUNKS_PER_THREAD`` per
    thread, each at least ``chunk_rows`` rows."""
    count = min(threads * CHUNKS_PER_THREAD, n_rows // max(chunk_rows, 1))
    if threads <= 1 or count < 2:
        return [0, n_rows]
    return [round(k * n_rows / count) for k in range(count + 1)]


def run_chunked(run: Callable[[npt.NDArray[np.float32]], Arrays], x: npt.NDArray[np.float32],
                threads: int, chunk_rows: int = CHUNK_ROWS) -> list[npt.NDArray[np.float32]]:
    """``run(x)``'s outputs (each with one row per row of ``x``), computed over row chunks on up
    to ``threads`` threads and concatenated in row order."""
    bounds = chunk_bounds(len(x), threads, chunk_rows)
    if len(bounds) == 2:
        return list(run(x))
    parts = [x[a:b] for a, b in pairwise(bounds)]
    with ThreadPoolExecutor(max_workers=min(threads, len(parts))) as pool:
        outs = list(pool.map(run, parts))
    return [np.concatenate([o[i] for o in outs]) for i in range(len(outs[0]))]

