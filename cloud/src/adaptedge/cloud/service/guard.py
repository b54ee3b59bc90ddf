"""Bounds on what an HPC model may cost: time per onnxruntime run, memory per process.

A bundle's model is data from whoever wrote the bundle; a hostile or broken one (a ``Loop``
with a huge trip count, a ``ConstantOfShape`` of gigabytes) must not hang or balloon the
worker. Time: every run gets a ``RunOptions`` that a watchdog thread terminates once the run
is older than ``limit_s`` (onnxruntime checks the flag between kernels and inside loops), so
the run fails with an error instead of hanging. Memory: sessions allocate from one shared
onnxruntime arena capped at ``HPC_MEMORY_LIMIT_BYTES``; an allocation past the cap fails the
run instead of growing the process.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Final

import onnxruntime as ort

DEFAULT_RUN_LIMIT_S: Final = 2.0
"""A run older than this is terminated (a legitimate HPC batch takes milliseconds)."""
HPC_MEMORY_LIMIT_BYTES: Final = 512 << 20
"""Cap of the arena every HPC session allocates from (model weights and intermediates)."""
_WATCH_TICK_S: Final = 0.05
_arena_lock = threading.Lock()
_arena_ready: bool | None = None


def use_capped_arena(opts: ort.SessionOptions) -> bool:
    """Make a session allocate from the process-wide capped arena; False if onnxruntime
    refused to create it (then only the time limit applies)."""
    global _arena_ready
    with _arena_lock:
        if _arena_ready is None:
            try:
                info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                         ort.OrtMemType.DEFAULT)
                config = ort.OrtArenaCfg({"max_mem": HPC_MEMORY_LIMIT_BYTES,
                                          "arena_extend_strategy": 1})
                ort.create_and_register_allocator(info, config)
                _arena_ready = True
            except Exception:  # already registered by another library, or unsupported
                _arena_ready = False
    if _arena_ready:
        opts.add_session_config_entry("session.use_env_allocators", "1")
    return bool(_arena_ready)


class RunTimeout(RuntimeError):
    """An onnxruntime run was terminated for exceeding the time limit."""


class RunGuard:
    """Hands out ``RunOptions`` for one run at a time and terminates the run past the limit.

    Usage: ``options = guard.begin()``; run with ``options``; ``guard.end()`` (in ``finally``);
    ``guard.expired`` then says whether the run was terminated. Not re-entrant: one run at a
    time per guard (the worker runs one batch at a time).
    """

    def __init__(self, limit_s: float = DEFAULT_RUN_LIMIT_S) -> None:
        if not limit_s > 0:
            raise ValueError(f"run limit must be > 0 s, got {limit_s}")
        self.limit_s = limit_s
        self.terminated = 0
        self.expired = False
        self._options = ort.RunOptions()
        self._options.log_severity_level = 4
        self._lock = threading.Lock()
        self._started: float | None = None
        self._wake = threading.Event()
        watcher = threading.Thread(target=_watch, args=(weakref.ref(self), self._wake),
                                   daemon=True, name="hpc-run-watchdog")
        watcher.start()

    def begin(self) -> ort.RunOptions:
        # No lock: one attribute store, and between runs ``end`` has (under the lock) set
        # ``_started`` to None and cleared ``terminate``, so ``_check`` sees None or this run's
        # start; it cannot terminate this run for an older one (``end`` waits for its lock).
        self.expired = False
        self._started = time.monotonic()
        return self._options

    def end(self) -> None:
        with self._lock:
            self._started = None
            if self._options.terminate:
                self._options.terminate = False
                self.expired = True
                self.terminated += 1

    def close(self) -> None:
        self._wake.set()

    def _check(self) -> None:
        with self._lock:
            started = self._started
            if started is not None and time.monotonic() - started > self.limit_s:
                self._options.terminate = True

    def __del__(self) -> None:
        self._wake.set()


def _watch(guard_ref: weakref.ReferenceType[RunGuard], stop: threading.Event) -> None:
    """Tick until the guard is gone or closed; terminate its run once past the limit."""
    while not stop.wait(_WATCH_TICK_S):
        guard = guard_ref()
        if guard is None:
            return
        guard._check()
        del guard
