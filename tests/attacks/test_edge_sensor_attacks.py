"""Issue 15 item 12: ``EdgeRuntime.predict`` never raises for anything a sensor does.

Each hostile reader fails its own read (named in ``failed_sensors``) and the decision is still
answered; a reader that blocks forever is cut off by the default live-read timeout even though
the bundle (like every trained bundle) sets no sensor timeout.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaptedge.edge import EdgeError, EdgeRuntime
from adaptedge.edge.errors import BundleRefused
from adaptedge.edge.sensors import DEFAULT_TIMEOUT_MS, ReaderPool
from adaptedge.protocol import Manifest
from adaptedge.protocol.bundle_digest import manifest_digest

Bundle = tuple[Path, Manifest]
ROW = np.array([0.3, -0.2, 1.0], dtype=np.float32)


class ArrayRaises:
    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise RuntimeError("the driver's buffer is gone")


class StrRaises(Exception):
    def __str__(self) -> str:
        raise ValueError("no message either")


def raise_unprintable() -> list[float]:
    raise StrRaises()


class ReadAttributeRaises:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name} on this bus")


HOSTILE: dict[str, tuple[Callable[[], Any] | object, str]] = {
    "huge int": (lambda: 10**400, "not numeric"),
    "huge int in a list": (lambda: [10**400], "not numeric"),
    "__array__ raises": (lambda: ArrayRaises(), "not numeric"),
    "None": (lambda: None, "returned None"),
    "float64 beyond float32": (lambda: np.array([1e300]), "non-finite"),
    "exception whose str raises": (raise_unprintable, "raised StrRaises"),
    "read attribute raises": (ReadAttributeRaises(), "not a usable reader"),
}


@pytest.mark.parametrize("timeouts", [None, {"*": math.inf}], ids=["default", "inline"])
@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_reader_fails_one_read(toy_bundle: Bundle, case: str,
                                       timeouts: dict[str, float] | None) -> None:
    path, _ = toy_bundle
    reader, reason = HOSTILE[case]
    with EdgeRuntime.load(path, operating_point="gate", sensor_timeouts_ms=timeouts) as rt:
        d = rt.predict({"a": lambda: ROW[:2], "b": reader})  # type: ignore[dict-item]
        assert d.failed_sensors.keys() == {"b"}
        assert reason in d.failed_sensors["b"], d.failed_sensors["b"]
        assert d.source == "degraded" and d.sensors_read == ("a",)
        assert rt.counters["sensor_failures"] == 1


def test_reader_blocking_forever_is_cut_by_the_default_timeout(toy_bundle: Bundle) -> None:
    path, manifest = toy_bundle
    assert all(s.timeout_ms is None for s in manifest.sensors)  # as trained bundles
    never = threading.Event()
    with EdgeRuntime.load(path, operating_point="gate") as rt:
        try:
            started = time.monotonic()
            d = rt.predict({"a": lambda: ROW[:2], "b": lambda: never.wait()})
            took = time.monotonic() - started
        finally:
            never.set()
    assert DEFAULT_TIMEOUT_MS / 1000 <= took < DEFAULT_TIMEOUT_MS / 1000 + 1.0
    assert d.failed_sensors["b"] == f"timed out after {DEFAULT_TIMEOUT_MS:g} ms"


def test_default_timeout_is_configurable(toy_bundle: Bundle) -> None:
    never = threading.Event()
    with EdgeRuntime.load(toy_bundle[0], operating_point="gate",
                          sensor_timeouts_ms={"*": 30.0}) as rt:
        try:
            started = time.monotonic()
            d = rt.predict({"a": lambda: ROW[:2], "b": lambda: never.wait()})
            assert time.monotonic() - started < 0.5
        finally:
            never.set()
    assert d.failed_sensors["b"] == "timed out after 30 ms"


def _with_sensor_timeout(path: Path, timeout_ms: float) -> None:
    manifest_path = path / "manifest.json"
    body = json.loads(manifest_path.read_text())
    body["sensors"][1]["timeout_ms"] = timeout_ms
    body["bundle_id"] = manifest_digest(body)
    manifest_path.write_text(json.dumps(body))


@pytest.mark.parametrize("timeout_ms", [1e13, 1e300, 0.0, -5.0])
def test_absurd_bundle_sensor_timeout_is_refused_at_load(toy_bundle: Bundle,
                                                         timeout_ms: float) -> None:
    path, _ = toy_bundle
    _with_sensor_timeout(path, timeout_ms)
    with pytest.raises(BundleRefused, match=r"sensors\[1\]\.timeout_ms.*one hour"):
        rt = EdgeRuntime.load(path, operating_point="gate")
        # Today's code gets here and raises OverflowError out of predict.
        rt.predict({"a": lambda: ROW[:2], "b": lambda: ROW[2:]})


def test_bundle_sensor_timeout_within_bounds_is_used(toy_bundle: Bundle) -> None:
    path, _ = toy_bundle
    _with_sensor_timeout(path, 40.0)
    never = threading.Event()
    with EdgeRuntime.load(path, operating_point="gate") as rt:
        try:
            d = rt.predict({"a": lambda: ROW[:2], "b": lambda: never.wait()})
        finally:
            never.set()
    assert d.failed_sensors["b"] == "timed out after 40 ms"


@pytest.mark.parametrize("timeout_ms", [1e13, float("nan"), 0.0])
def test_absurd_device_sensor_timeout_is_refused(toy_bundle: Bundle, timeout_ms: float) -> None:
    with pytest.raises(EdgeError, match="sensor timeout for 'b'"):
        EdgeRuntime.load(toy_bundle[0], sensor_timeouts_ms={"b": timeout_ms})


def test_reader_pool_bounds_a_huge_timeout() -> None:
    pool = ReaderPool(max_threads=1)
    try:
        assert pool.call(lambda: 1, 1e13) == (1, None)
    finally:
        pool.close()
