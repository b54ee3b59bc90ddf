"""Sensor faults: a reader that raises, hangs, returns NaN or the wrong length fails one read,
never the decision; the walk continues with the actions that remain."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from adaptedge.edge import EdgeRuntime
from adaptedge.edge.sensors import ReaderPool
from adaptedge.protocol import Manifest
from tests.support.edge_doubles import HpcUplink
from tests.support.reference_walk import ReferenceWalk

Bundle = tuple[Path, Manifest]


def good(row: np.ndarray, cols: tuple[int, ...]) -> Callable[[], np.ndarray]:
    return lambda: row[list(cols)]


def raising() -> np.ndarray:
    raise OSError("i2c bus error")


def hanging(release: threading.Event) -> Callable[[], list[float]]:
    def read() -> list[float]:
        release.wait(5.0)
        return [0.0]
    return read


FAULTS: dict[str, tuple[Callable[[threading.Event], object], str]] = {
    "raises": (lambda _: raising, "raised OSError: i2c bus error"),
    "nan": (lambda _: (lambda: [float("nan")]), "non-finite"),
    "inf": (lambda _: (lambda: np.array([np.inf])), "non-finite"),
    "wrong length": (lambda _: (lambda: [1.0, 2.0]), "returned 2 values, expected 1"),
    "not numeric": (lambda _: (lambda: "hot"), "not numeric"),
    "times out": (hanging, "timed out after 50 ms"),
    "missing": (lambda _: None, "no reader"),
}


def rows_where(path: Path, manifest: Manifest, want: Callable[[np.ndarray], bool],
               n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    found = [r for r in rng.normal(scale=2.0, size=(2000, 3)).astype(np.float32) if want(r)]
    assert len(found) >= n, "the toy bundle should produce such rows"
    return found[:n]


@pytest.mark.parametrize("fault", list(FAULTS))
def test_failed_acquire_stays_and_takes_next_best_action(toy_bundle: Bundle, fault: str) -> None:
    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    # Rows where the walk at node "a" chooses to acquire "b" (action 1).
    targets = rows_where(path, manifest,
                         lambda r: ref.walk("walk", r)["nodes"] == ("root", "a", "ab"), 3)
    make, reason = FAULTS[fault]
    release = threading.Event()
    rt = EdgeRuntime.load(path, operating_point="walk", uplink=HpcUplink(ref),
                          sensor_timeouts_ms={"b": 50.0})
    try:
        for row in targets:
            reader = make(release)
            sensors = {"a": good(row, (0, 1))}
            if reader is not None:
                sensors["b"] = reader  # type: ignore[assignment]
            started = time.monotonic()
            d = rt.predict(sensors)
            assert time.monotonic() - started < 2.0
            assert d.nodes == ("root", "a")
            assert list(d.failed_sensors) == ["b"] and reason in d.failed_sensors["b"]
            scores = ref.run("a.onnx", (0, 1), row)[1]
            ranked = [int(i) for i in np.argsort(-scores.astype(np.float64), kind="stable")]
            best = next(manifest.policies["walk"].nodes["a"].actions[i].kind
                        for i in ranked if i != 1)
            # Escalating reads the HPC's unread sensors: "b" already failed, so it is left out.
            assert d.escalated == (best == "escalate")
            assert d.source == ("cloud" if best == "escalate" else "local")
            assert d.sensors_read == ("a",)
        assert rt.counters["sensor_failures"] == len(targets)
    finally:
        release.set()
        rt.close()


def test_escalation_sends_mask_without_failed_hpc_sensor(toy_bundle: Bundle) -> None:
    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    # Rows where node "a" ranks acquire-b first and escalate second: b fails, the walk
    # escalates, and the HPC's sensor b is left out of the mask.
    def second_is_escalate(r: np.ndarray) -> bool:
        order = np.argsort(-ref.run("a.onnx", (0, 1), r)[1].astype(np.float64), kind="stable")
        return bool(order[:2].tolist() == [1, 2])

    targets = rows_where(path, manifest, second_is_escalate, 2)
    uplink = HpcUplink(ref)
    rt = EdgeRuntime.load(path, operating_point="walk", uplink=uplink)
    for row in targets:
        d = rt.predict({"a": good(row, (0, 1)), "b": raising})
        assert d.escalated and d.source == "cloud"
        assert d.failed_sensors.keys() == {"b"}
        assert d.cost == ref.cost(("a",), True)
    mask = uplink.requests[-1].mask_array()
    assert mask.tolist() == [True, True, False]
    assert uplink.requests[-1].feature_array()[2] == 0.0


def test_root_sensor_failure_escalates_or_degrades(toy_bundle: Bundle) -> None:
    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    row = np.array([0.3, -0.2, 1.0], dtype=np.float32)
    uplink = HpcUplink(ref)
    rt = EdgeRuntime.load(path, operating_point="gate", uplink=uplink)
    d = rt.predict({"a": raising, "b": good(row, (2,))})
    # The gate's root holds a and b: it cannot run on a failed sensor, so it escalates what it has.
    assert d.escalated and d.source == "cloud" and d.failed_sensors.keys() == {"a"}
    assert uplink.requests[-1].mask_array().tolist() == [False, False, True]
    offline = EdgeRuntime.load(path, operating_point="gate")
    d = offline.predict({"a": raising, "b": good(row, (2,))})
    assert d.source == "degraded" and d.error == "no_uplink"


def test_single_remaining_action_failing_answers_degraded(toy_bundle: Bundle) -> None:
    path, _ = toy_bundle
    rt = EdgeRuntime.load(path, operating_point="walk")
    # The walk's root has one action (acquire a); when a fails nothing is left.
    d = rt.predict({"a": raising, "b": lambda: [0.0]})
    assert d.source == "degraded" and d.error == "sensor_failure"
    assert d.nodes == ("root",) and d.sensors_read == () and d.failed_sensors.keys() == {"a"}
    assert d.cost.energy_mj == 0.0


def test_non_finite_row_marks_the_sensor_failed(toy_bundle: Bundle) -> None:
    path, _ = toy_bundle
    rt = EdgeRuntime.load(path, operating_point="walk")
    d = rt.predict_row([np.nan, 1.0, 1.0])
    assert d.failed_sensors.keys() == {"a"} and d.source == "degraded"
    assert rt.counters["sensor_failures"] == 1


def test_huge_finite_row_is_not_a_failure(toy_bundle: Bundle) -> None:
    rt = EdgeRuntime.load(toy_bundle[0], operating_point="gate")
    d = rt.predict_row([3e30, -3e30, 1.0])  # its squared norm overflows float32
    assert d.failed_sensors == {}


def test_hanging_readers_never_leak_threads_or_hang(toy_bundle: Bundle) -> None:
    path, _ = toy_bundle
    release = threading.Event()
    rt = EdgeRuntime.load(path, operating_point="gate", sensor_timeouts_ms={"*": 20.0},
                          max_reader_threads=2)
    before = threading.active_count()
    try:
        started = time.monotonic()
        for _ in range(10):
            d = rt.predict({"a": hanging(release), "b": hanging(release)})
            assert d.failed_sensors.keys() == {"a", "b"}
        # 2 threads get stuck; later reads fail at once instead of starting more threads.
        assert time.monotonic() - started < 2.0
        assert threading.active_count() - before <= 2
        assert "no reader thread free" in d.failed_sensors["a"]
    finally:
        release.set()
    # Once the stuck reads return, the threads are reused.
    deadline = time.monotonic() + 5
    row = np.array([0.1, 0.2, 0.3], dtype=np.float32)
    while time.monotonic() < deadline:
        d = rt.predict({"a": good(row, (0, 1)), "b": good(row, (2,))})
        if not d.failed_sensors:
            break
        time.sleep(0.02)
    assert d.failed_sensors == {}
    rt.close()


def test_reader_pool_returns_values_and_errors() -> None:
    pool = ReaderPool(max_threads=1)
    assert pool.call(lambda: 42, 1.0) == (42, None)
    value, why = pool.call(raising, 1.0)
    assert value is None and why is not None and "OSError" in why
    assert pool.n_threads == 1
    pool.close()
    with pytest.raises(ValueError, match="max_threads"):
        ReaderPool(0)


def test_unknown_sensor_timeout_is_refused(toy_bundle: Bundle) -> None:
    from adaptedge.edge import EdgeError

    with pytest.raises(EdgeError, match="unknown sensor"):
        EdgeRuntime.load(toy_bundle[0], sensor_timeouts_ms={"c": 10.0})
    with pytest.raises(EdgeError, match="positive"):
        EdgeRuntime.load(toy_bundle[0], sensor_timeouts_ms={"a": -1.0})


def test_a_failed_sensor_is_not_retried_later_in_the_walk(tmp_path: Path) -> None:
    from adaptedge.protocol import (
        Action,
        CostWeights,
        HpcRef,
        LinkSpec,
        ModelRef,
        OperatingPoint,
        PolicyGraph,
        PolicyNode,
        SensorSpec,
        write_bundle,
    )
    from tests.support.toy_bundle import linear_model_bytes

    def model(n_in: int, scores: list[float] | None) -> bytes:
        w = np.ones((n_in, 2), np.float32)
        if scores is None:
            return linear_model_bytes(w, np.zeros(2, np.float32))
        return linear_model_bytes(w, np.zeros(2, np.float32),
                                  np.zeros((n_in, len(scores)), np.float32),
                                  np.asarray(scores, np.float32))

    files = {"root.onnx": model(0, [1.0, 0.0]), "a.onnx": model(1, [1.0, 0.0]),
             "b.onnx": model(1, None), "ab.onnx": model(2, None)}
    graph = PolicyGraph(root="root", nodes={
        # Root prefers b, then a; node a prefers acquiring b, then stopping.
        "root": PolicyNode((), ModelRef("root.onnx", ()),
                           (Action("acquire", "b", "b"), Action("acquire", "a", "a"))),
        "a": PolicyNode(("a",), ModelRef("a.onnx", (0,)),
                        (Action("acquire", "b", "ab"), Action("stop"))),
        "b": PolicyNode(("b",), ModelRef("b.onnx", (1,)), (Action("stop"),)),
        "ab": PolicyNode(("a", "b"), ModelRef("ab.onnx", (0, 1)), (Action("stop"),)),
    })
    manifest = Manifest(
        schema_version=1, bundle_id="pending", classes=("x", "y"), feature_names=("fa", "fb"),
        sensors=(SensorSpec("a", (0,)), SensorSpec("b", (1,))), link=LinkSpec(),
        cost_weights=CostWeights(), hpc=HpcRef("ab.onnx", ("a", "b"), accuracy=0.5),
        policies={"p": graph}, operating_points=(OperatingPoint("p", "p", accuracy=0.5,
                                                                cost=1.0),),
        default_operating_point="p", files={})
    write_bundle(tmp_path / "retry", manifest, files)
    rt = EdgeRuntime.load(tmp_path / "retry")
    calls: list[str] = []

    def read_b() -> list[float]:
        calls.append("b")
        raise OSError("b is broken")

    d = rt.predict({"a": lambda: [1.0], "b": read_b})
    assert calls == ["b"]
    assert d.nodes == ("root", "a") and d.sensors_read == ("a",)
    assert d.source == "local" and d.failed_sensors.keys() == {"b"}
    # Without faults the walk goes root -> b.
    assert rt.predict({"a": lambda: [1.0], "b": lambda: [2.0]}).nodes == ("root", "b")


def test_misnamed_reader_keys_are_a_clear_error(toy_bundle: Bundle) -> None:
    """A typo in a reader's name is refused, naming it and the bundle's sensors (a missing
    reader stays a failed read)."""
    from adaptedge.edge import SensorNameError

    path, _ = toy_bundle
    with EdgeRuntime.load(path) as rt:
        with pytest.raises(SensorNameError, match=r"\['bb'\].*\['a', 'b'\]"):
            rt.predict({"a": lambda: [0.0, 0.0], "bb": lambda: [0.0]})
        assert rt.counters["decisions"] == 0
        rt.predict({"a": lambda: [0.0, 0.0]})  # b missing: a failed read if the walk needs it
