"""Reading sensors safely: whatever a reader does fails one read, never the decision.

A reader is a callable returning the sensor's feature values, or an object with ``read()``.
A read fails when the reader raises (anything, including ``OverflowError`` from a huge integer
or an ``__array__`` that raises), exceeds its timeout, returns ``None``, non-finite values or
the wrong number of values.

Every live read has a timeout: the bundle's ``timeout_ms`` for the sensor, else
``DEFAULT_TIMEOUT_MS`` (1 s; trained bundles carry none), both overridable per device
(``EdgeRuntime.load(sensor_timeouts_ms={"*": ms})``, ``adaptedge edge run --sensor-timeout``).
A timeout of ``math.inf`` reads inline in the caller's thread, with no bound. Timed reads,
conversion included, run on a small reusable pool of worker threads; a reader that hangs
keeps its thread until it returns, and when every thread is stuck further timed reads fail at
once instead of starting more threads (bounded, never a hang).
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from adaptedge.edge.errors import EdgeError
from adaptedge.protocol.manifest import MAX_SENSOR_TIMEOUT_MS, SensorSpec

DEFAULT_TIMEOUT_MS = 1000.0
"""Timeout of a live read when neither the bundle nor the device sets one for the sensor."""


class SupportsRead(Protocol):
    def read(self) -> Any: ...


Reader = Callable[[], Any] | SupportsRead
F32 = npt.NDArray[np.float32]


def as_callable(reader: Reader) -> Callable[[], Any]:
    read = getattr(reader, "read", None)
    if callable(read):
        return read  # type: ignore[no-any-return]
    if callable(reader):
        return reader
    raise TypeError(f"a sensor reader must be callable or have read(), got {type(reader).__name__}")


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception, even one whose ``__str__`` raises."""
    try:
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    except Exception:
        return type(exc).__name__


def check_values(raw: Any, n_features: int) -> tuple[F32 | None, str | None]:
    """The reading as float32 values, or why it is unusable (never raises)."""
    if raw is None:
        return None, "returned None"
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # too large for float32: inf
            values = np.asarray(raw, dtype=np.float32).reshape(-1)
    except Exception as exc:  # OverflowError, a raising __array__, ...: the reader's fault
        return None, f"returned a value that is not numeric ({type(raw).__name__}: " \
                     f"{describe(exc)})"
    if values.shape[0] != n_features:
        return None, f"returned {values.shape[0]} values, expected {n_features}"
    if not math.isfinite(float(values.sum(dtype=np.float64))):
        return None, "returned non-finite values (NaN or infinity)"
    return values, None


def resolve_timeouts(specs: Sequence[SensorSpec],
                     overrides: Mapping[str, float]) -> list[float | None]:
    """Each sensor's read timeout in seconds (``None``: read inline, unbounded).

    ``overrides`` maps sensor names to milliseconds and beats the bundle; its key ``"*"``
    replaces ``DEFAULT_TIMEOUT_MS`` for sensors the bundle gives no timeout. Values must be in
    (0, ``MAX_SENSOR_TIMEOUT_MS``] or ``math.inf`` (no timeout).
    """
    names = [spec.name for spec in specs]
    unknown = set(overrides) - set(names) - {"*"}
    if unknown:
        raise EdgeError(f"sensor_timeouts_ms names unknown sensor(s) {sorted(unknown)}; "
                        f"the bundle has {names}")
    out: list[float | None] = []
    for spec in specs:
        ms = overrides.get(spec.name, spec.timeout_ms)
        if ms is None:
            ms = overrides.get("*", DEFAULT_TIMEOUT_MS)
        if ms == math.inf:
            out.append(None)
            continue
        if not isinstance(ms, int | float) or not 0 < ms <= MAX_SENSOR_TIMEOUT_MS:  # and NaN
            raise EdgeError(f"sensor timeout for {spec.name!r} must be a positive number of "
                            f"milliseconds up to {MAX_SENSOR_TIMEOUT_MS:g} (or inf: no "
                            f"timeout), got {ms}")
        out.append(ms / 1000.0)
    return out


class _Call:
    __slots__ = ("done", "error", "fn", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class ReaderPool:
    """At most ``max_threads`` daemon worker threads, reused across reads."""

    def __init__(self, max_threads: int = 4) -> None:
        if max_threads < 1:
            raise ValueError(f"max_threads must be >= 1, got {max_threads}")
        self.max_threads = max_threads
        self._idle: queue.SimpleQueue[queue.SimpleQueue[_Call | None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._readers: list[threading.Thread] = []

    @property
    def n_threads(self) -> int:
        return len(self._readers)

    def _worker(self) -> queue.SimpleQueue[_Call | None] | None:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if len(self._readers) >= self.max_threads:
                return None
            inbox: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
            thread = threading.Thread(target=self._serve, args=(inbox,), daemon=True,
                                      name=f"edge.sensor_reader[{len(self._readers)}]")
            self._readers.append(thread)
        thread.start()
        return inbox

    def _serve(self, inbox: queue.SimpleQueue[_Call | None]) -> None:
        while (call := inbox.get()) is not None:
            try:
                call.value = call.fn()
            except BaseException as exc:  # reported to the caller as a failed read
                call.error = exc
            call.done.set()
            self._idle.put(inbox)

    def call(self, fn: Callable[[], Any], timeout_s: float) -> tuple[Any, str | None]:
        """``(value, None)`` or ``(None, why it failed)``; returns within ``timeout_s``."""
        inbox = self._worker()
        if inbox is None:
            return None, (f"no reader thread free: all {self.max_threads} are stuck in reads "
                          "that timed out")
        call = _Call(fn)
        inbox.put(call)
        if not call.done.wait(min(timeout_s, threading.TIMEOUT_MAX)):
            return None, f"timed out after {timeout_s * 1000:g} ms"
        if call.error is not None:
            return None, f"raised {describe(call.error)}"
        return call.value, None

    def close(self) -> None:
        """Ask idle workers to exit (stuck ones exit when their read returns)."""
        while True:
            try:
                self._idle.get_nowait().put(None)
            except queue.Empty:
                return


def read_sensor(reader: Reader | None, n_features: int, timeout_s: float | None,
                pool: ReaderPool) -> tuple[F32 | None, str | None]:
    """Read one sensor: its values, or ``None`` and the reason the read failed (never raises)."""
    if reader is None:
        return None, "no reader was given for this sensor"
    try:
        fn = as_callable(reader)
    except Exception as exc:  # not a reader, or a read attribute that raises
        return None, f"is not a usable reader: {describe(exc)}"

    def read() -> tuple[F32 | None, str | None]:
        return check_values(fn(), n_features)

    if timeout_s is None:
        try:
            return read()
        except Exception as exc:
            return None, f"raised {describe(exc)}"
    result, error = pool.call(read, timeout_s)
    if error is not None:
        return None, error
    return result  # type: ignore[no-any-return]
