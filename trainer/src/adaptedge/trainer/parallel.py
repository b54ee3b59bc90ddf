"""Where a sweep's independent fits run: in this process or joblib workers (``--jobs``), or as
tasks on a Dask cluster (``--cluster tcp://HOST:PORT``, ``$ADAPTEDGE_CLUSTER``).

Every fan-out in the trainer calls ``parallel_map``. ``use_cluster(address)`` connects to a
Dask scheduler for the length of a ``with`` block; inside it ``parallel_map`` submits one task
per item. Objects that several items share by identity (the training arrays, the HPC's
out-of-fold probabilities) are scattered to every worker once, not sent with each task. A
worker lost mid-sweep has its tasks rerun on another worker (by the scheduler, or here when
the worker took scattered data along); losing the scheduler raises ``ClusterError``. Results
come back in item order, so a sweep gives the same models wherever it ran.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from numbers import Number
from typing import Any, TypeVar

from adaptedge.trainer.errors import ClusterError as ClusterError

T = TypeVar("T")
R = TypeVar("R")

CLUSTER_ENV = "ADAPTEDGE_CLUSTER"
INSTALL_HINT = "--cluster needs the 'cluster' extra: pip install 'adaptedge[cluster]'"
CONNECT_TIMEOUT_S = 10.0
"""How long to wait for the scheduler to answer before giving up."""
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
LOST_DATA_ROUNDS = 3
"""Rounds of scatter + submit for items whose scattered data a dying worker took along."""


@dataclass(frozen=True)
class _Slot:
    """Stands in a task's item for the scattered object at ``index``."""

    index: int


@dataclass(frozen=True)
class DaskCluster:
    """A connected ``distributed.Client`` and the scheduler address it came from."""

    address: str
    client: Any


_CLUSTER: ContextVar[DaskCluster | None] = ContextVar("adaptedge_cluster", default=None)


def cluster_address(explicit: str | None) -> str | None:
    """``explicit`` (``--cluster``) if given, else ``$ADAPTEDGE_CLUSTER``, else None (local)."""
    address = explicit if explicit is not None else os.environ.get(CLUSTER_ENV)
    return (address.strip() or None) if address is not None else None


@contextmanager
def use_cluster(address: str | None, *, timeout: float = CONNECT_TIMEOUT_S
                ) -> Iterator[DaskCluster | None]:
    """Run every ``parallel_map`` inside the block on the Dask scheduler at ``address``;
    ``None`` keeps the local backend. The connection is closed on the way out."""
    if address is None:
        yield None
        return
    cluster = DaskCluster(address, _connect(address, timeout))
    token = _CLUSTER.set(cluster)
    try:
        yield cluster
    finally:
        _CLUSTER.reset(token)
        _close(cluster.client)


def check_address(address: str) -> str:
    """``address`` if it reads ``tcp://HOST:PORT`` (or ``tls://``), else ClusterError."""
    scheme, sep, rest = address.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or scheme not in ("tcp", "tls") or not colon or not host or not port.isdigit():
        raise ClusterError(f"--cluster {address!r}: expected the Dask scheduler's address as "
                           "tcp://HOST:PORT (what 'dask scheduler' prints)")
    return address


def _connect(address: str, timeout: float) -> Any:
    try:
        from distributed import Client
    except ImportError as exc:
        raise ClusterError(INSTALL_HINT) from exc
    check_address(address)
    try:
        return Client(address, timeout=f"{timeout}s",  # type: ignore[no-untyped-call]
                      set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"no Dask scheduler answered at {address} within {timeout:g} s: "
                           "start one with 'dask scheduler' (and workers with 'dask worker "
                           f"{address}'), or fix --cluster / ${CLUSTER_ENV}") from exc


def _close(client: Any) -> None:
    """Close the connection. With the scheduler gone, Dask logs the cancelled reconnection as
    a traceback: the user has our one-line error already, so that log is held back."""
    logger = logging.getLogger("distributed.client")
    level = logger.level
    if client.status != "running":
        logger.setLevel(logging.CRITICAL)
    try:
        with suppress(Exception):  # closing must not hide the error that got us here
            client.close(timeout=5)
    finally:
        logger.setLevel(level)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the OS reports one (a
    container's or ``taskset``'s limit), else ``os.cpu_count()``, else 1. The default of
    ``adaptedge train --jobs``."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        with suppress(OSError):
            return max(1, len(affinity(0)))
    return max(1, os.cpu_count() or 1)


def parallel_map(fn: Callable[[T], R], items: Sequence[T], n_jobs: int, progress: bool,
                 desc: str) -> list[R]:
    """``[fn(i) for i in items]``: on the active Dask cluster (see ``use_cluster``), else on at
    most ``n_jobs`` local processes (``local_map``); with a progress bar when ``progress``."""
    cluster = _CLUSTER.get()
    if cluster is not None:
        return dask_map(cluster, fn, items, progress, desc)
    return local_map(fn, items, n_jobs, progress, desc)


def local_map(fn: Callable[[T], R], items: Sequence[T], n_jobs: int, progress: bool,
              desc: str) -> list[R]:
    """``[fn(i) for i in items]`` here (one job) or on joblib's process pool, reporting
    progress (``trainer.progress``: a bar on a terminal, log lines otherwise).

    The pool is capped at ``usable_cores()`` (and at the number of items): the fits are
    CPU-bound, so processes beyond the cores only add memory (each holds its own copy of the
    training arrays) and contention, never speed. Results come back in item order.
    """
    from adaptedge.trainer.progress import track

    jobs = max(1, min(int(n_jobs), usable_cores(), len(items)))
    if jobs == 1:
        return list(track((fn(item) for item in items), desc, len(items), progress))
    from joblib import Parallel, delayed

    out = Parallel(n_jobs=jobs, return_as="generator")(delayed(fn)(i) for i in items)
    return list(track(out, desc, len(items), progress))


def shared_objects(items: Sequence[Any]) -> list[Any]:
    """Objects found (by identity) in more than one tuple item: the data every task needs.
    Numbers, strings, ``None`` and classes are cheap to send with each task and stay put."""
    seen: dict[int, tuple[Any, int]] = {}
    for item in items:
        if not isinstance(item, tuple):
            continue
        for part in {id(p): p for p in item}.values():
            if part is None or isinstance(part, Number | str | bytes | type):
                continue
            obj, count = seen.get(id(part), (part, 0))
            seen[id(part)] = (obj, count + 1)
    return [obj for obj, count in seen.values() if count > 1]


def _template(item: Any, slots: dict[int, int]) -> Any:
    if not isinstance(item, tuple):
        return item
    return tuple(_Slot(slots[id(p)]) if id(p) in slots else p for p in item)


def _run_task(fn: Callable[[Any], Any], template: Any, *shared: Any) -> Any:
    """On a worker: put the scattered objects back into the item, then call ``fn``."""
    _untrim_malloc()
    if isinstance(template, tuple):
        template = tuple(shared[p.index] if isinstance(p, _Slot) else p for p in template)
    return fn(template)


_MALLOC_TUNED: list[bool] = []


def _untrim_malloc() -> None:
    """Once per worker process: give glibc back large mmap and trim thresholds.

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``. Setting it also pins
    glibc's mmap threshold at 128 KiB, so every numpy temporary above that is mapped and
    unmapped again: ADAPT-GBRT fits took 2.7x the CPU time of the same fit here (letter-binary,
    14.5 s vs 5.4 s). 32 MiB / 64 MiB are what glibc's own dynamic threshold grows to.
    Allocation only: results do not change. A no-op off glibc.
    """
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED.append(True)
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = libc.mallopt if libc is not None else None
    except (OSError, AttributeError):
        return
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, 32 << 20)
        mallopt(M_TRIM_THRESHOLD, 64 << 20)


def dask_map(cluster: DaskCluster, fn: Callable[[T], R], items: Sequence[T], progress: bool,
             desc: str) -> list[R]:
    """One task per item on ``cluster``; shared data scattered once (``broadcast=True``).

    Dask reruns the tasks of a lost worker by itself, but scattered data cannot be recomputed:
    if the last worker holding a copy dies (Dask's memory manager trims broadcast copies),
    the tasks needing it are cancelled. Those items are scattered and submitted again, up to
    ``LOST_DATA_ROUNDS`` times; a lost scheduler is a ``ClusterError``.
    """
    results: dict[int, Any] = {}
    bar = _bar(len(items), progress, desc)
    try:
        for _ in range(LOST_DATA_ROUNDS):
            pending = [i for i in range(len(items)) if i not in results]
            if not pending:
                break
            _run_round(cluster, fn, {i: items[i] for i in pending}, results, bar, desc)
    except _lost_errors() as exc:
        raise _lost(cluster, desc) from exc
    finally:
        if bar is not None:
            bar.close()
    if len(results) < len(items):
        raise ClusterError(f"the Dask cluster at {cluster.address} kept losing the "
                           f"{desc!r} sweep's data ({LOST_DATA_ROUNDS} rounds): are its "
                           "workers stable? Nothing was written")
    return [results[i] for i in range(len(items))]


def _run_round(cluster: DaskCluster, fn: Callable[[Any], Any], items: dict[int, Any],
               results: dict[int, Any], bar: Any, desc: str) -> None:
    """Submit ``items``, store what finishes in ``results``; cancelled tasks stay missing."""
    from distributed import as_completed

    client = cluster.client
    shared = shared_objects(list(items.values()))
    handles = client.scatter(shared, broadcast=True, hash=False) if shared else []
    slots = {id(obj): i for i, obj in enumerate(shared)}
    run = os.urandom(4).hex()
    futures = {client.submit(_run_task, fn, _template(item, slots), *handles, pure=False,
                             key=f"{desc}-{i}-{run}"): i
               for i, item in items.items()}
    try:
        for future in as_completed(futures, loop=client.loop):  # type: ignore[no-untyped-call]
            if future.status == "cancelled":
                if client.status != "running":
                    raise _lost(cluster, desc)
                continue  # its scattered data went with a worker: next round
            results[futures[future]] = future.result()  # a task's own error is raised here
            if bar is not None:
                bar.update(1)
    finally:
        for future in [*futures, *handles]:
            future.release()


def _lost(cluster: DaskCluster, desc: str) -> ClusterError:
    return ClusterError(f"lost the Dask scheduler at {cluster.address} during the {desc!r} "
                        "sweep, so nothing was written: check the scheduler and run again")


def _lost_errors() -> tuple[type[BaseException], ...]:
    from distributed.client import FutureCancelledError

    return (OSError, TimeoutError, FutureCancelledError)


def _bar(total: int, progress: bool, desc: str) -> Any:
    """A bar counting finished remote tasks, or None."""
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=f"{desc} (cluster)", leave=False)
