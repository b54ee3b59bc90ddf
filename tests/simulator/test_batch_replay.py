"""The batched replay makes exactly the per-row replay's decisions (the real ``EdgeRuntime`` row
by row): same label, source, escalation, sensors read (in order), request id, start time,
latency and energy on every row of every device, on every bundle kind (size-dependent ones
with per-item sizes too, regression ones: the same value per row), impairments on (a
bandwidth limit too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from adaptedge.protocol import Manifest
from adaptedge.protocol.bundle import verify
from adaptedge.simulator.network import NetworkConfig, NetworkModel, Outage
from adaptedge.simulator.replay import replay
from adaptedge.simulator.replay_session import ReplaySession
from adaptedge.simulator.scenario import DevicesConfig, Scenario
from tests.protocol.walk import test_route
from tests.support.dataset_bundle import build_dataset_bundle

F32 = npt.NDArray[np.float32]
SCENARIOS = {
    "ideal": Scenario(seed=1, devices=DevicesConfig(count=2, rate_hz=20)),
    # jitter + loss + an outage, and rows faster than round trips: the clock loop path
    "impaired": Scenario(seed=5, devices=DevicesConfig(count=3, rate_hz=50),
                         network=NetworkConfig(rtt_ms=120, jitter=0.8, loss=0.1,
                                               outages=(Outage(2.0, 1.0),))),
    # rows slower than round trips: the vectorised clock path, with loss and an outage
    "sparse": Scenario(seed=9, devices=DevicesConfig(count=2, rate_hz=2),
                       network=NetworkConfig(rtt_ms=300, jitter=0.5, loss=0.2,
                                             outages=(Outage(30.0, 20.0),))),
    # a bandwidth limit: each round trip carries its request's and the last reply's bytes
    # (some exchanges run past the deadline only because of them)
    "bandwidth": Scenario(seed=3, devices=DevicesConfig(count=2, rate_hz=20),
                          network=NetworkConfig(rtt_ms=60, jitter=0.3, loss=0.05,
                                                bandwidth_kbps=12, outages=(Outage(5.0, 2.0),))),
}
COLUMNS = ("device", "row", "t_start", "latency_ms", "label", "truth", "source", "escalated",
           "sent", "sensors", "request_id", "energy_mj", "value", "target")


def assert_same_decisions(bundle: Path, X: F32, y: npt.NDArray[Any], point: str,
                          **kw: Any) -> set[str]:
    """Every scenario (and the always-local baseline): batched == per-row, column by column.
    Returns the sources seen on the impaired link."""
    runs: list[tuple[str, dict[str, Any]]] = [(name, dict(scenario=s))
                                              for name, s in SCENARIOS.items()]
    runs.append(("no cloud", dict(scenario=SCENARIOS["impaired"], cloud=False)))
    seen: set[str] = set()
    session = ReplaySession(bundle, disk_cache=False)  # verified once for all the runs
    for name, args in runs:
        fast = replay(session, X, y, operating_point=point, **args, **kw)
        slow = replay(session, X, y, operating_point=point, batched=False, **args, **kw)
        assert fast.n == slow.n == len(X) * args["scenario"].devices.count
        for col in COLUMNS:
            a, b = getattr(fast.columns, col), getattr(slow.columns, col)
            diff = [i for i, (u, v) in enumerate(zip(a, b, strict=True)) if u != v]
            assert not diff, (f"{name}/{point}: column {col} differs on {len(diff)} rows, first "
                              f"{diff[0]}: batched {a[diff[0]]!r}, per-row {b[diff[0]]!r}")
        assert fast.duration_s == slow.duration_s
        if name == "impaired":
            seen |= set(fast.columns.source)
    return seen


def rows(n: int, width: int, seed: int) -> tuple[F32, npt.NDArray[np.int64]]:
    X = np.random.default_rng(seed).normal(size=(n, width)).astype(np.float32)
    return X, (X[:, 0] + X[:, -1] > 0).astype(np.int64)


@pytest.mark.parametrize("point", ["gate", "walk"])
def test_toy_bundle_one_node_and_acquire(toy_bundle: tuple[Path, Manifest], point: str) -> None:
    X, y = rows(400, 3, seed=2)
    assert assert_same_decisions(toy_bundle[0], X, y, point) == {"local", "degraded", "cloud"}


@pytest.mark.parametrize("point", ["gate", "walk"])
def test_toy_regression_bundle(tmp_path: Path, point: str) -> None:
    from tests.support.toy_regression_bundle import build_toy_regression_bundle, hpc_value

    build_toy_regression_bundle(tmp_path / "b")
    X, _ = rows(400, 3, seed=2)
    y = (2.0 * X[:, 0] - X[:, 2]).astype(np.float64)
    assert assert_same_decisions(tmp_path / "b", X, y, point) == {"local", "degraded", "cloud"}
    run = replay(tmp_path / "b", X, y, operating_point=point, scenario=SCENARIOS["ideal"])
    c = run.columns
    assert run.regression and set(c.label) == {-1} and len(c.value) == len(c.target) == run.n
    assert np.array_equal(c.target, np.tile(y, 2))
    cloud = np.flatnonzero(np.asarray(c.source) == "cloud")
    hpc = [hpc_value(X[c.row[i]]) for i in cloud]  # float32, up to its rounding order
    assert cloud.size and np.allclose(c.value[cloud], hpc, rtol=1e-6, atol=1e-6)
    errors = run.errors()
    diff = np.asarray(c.value) - np.asarray(c.target)
    assert errors["mse"] == pytest.approx(np.mean(diff ** 2), rel=1e-12)
    assert errors["rmse"] == pytest.approx(np.sqrt(errors["mse"]), rel=1e-12)
    assert np.isnan(run.accuracy())


def test_dataset_bundle(tmp_path: Path) -> None:
    from adaptedge.trainer.data.datasets import load_dataset

    manifest = build_dataset_bundle(tmp_path / "b", "heart", escalate=0.4)
    X, y = load_dataset("heart").split("test")
    seen = assert_same_decisions(tmp_path / "b", X, y, manifest.default_operating_point)
    assert seen == {"local", "degraded", "cloud"}


def test_route_bundle(tmp_path: Path) -> None:
    graph = test_route.route_graph.__wrapped__(tmp_path)  # type: ignore[attr-defined]
    X = test_route.route_rows(500, seed=4)
    y = (X[:, 0] > 0).astype(np.int64)
    seen = assert_same_decisions(graph.path, X, y, test_route.POLICY)
    assert seen == {"local", "degraded", "cloud"}


@pytest.mark.slow
def test_dag_bundle(tmp_path: Path) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.export.bundle import export_bundle
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.registry import MethodOptions, get_method

    dataset = load_dataset("wall-robot")
    hpc = fit_hpc(dataset, kind=make_pipeline(StandardScaler(), LogisticRegression(
        max_iter=2000)), cache=False)
    exports = get_method("dag")(dataset, hpc, MethodOptions(quick=True, extra={
        "classifier": "lr", "lambdas": "0.02,0.1"}))
    manifest = export_bundle(tmp_path / "dag", dataset, hpc, exports)
    X, y = dataset.split("test")
    multi = [p.name for p in manifest.operating_points
             if len(manifest.policies[p.policy].nodes) > 1]
    assert multi, "the quick DAG train gave one-node policies only"
    seen: set[str] = set()
    for point in multi:
        seen |= assert_same_decisions(tmp_path / "dag", X[:600], y[:600], point)
    assert seen == {"local", "degraded", "cloud"}, "no DAG point escalates: add a lambda"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["polydom", "adapt-gbrt"])
def test_size_dependent_bundle_with_item_sizes(tmp_path: Path, method: str) -> None:
    from adaptedge.trainer.api import train_bundle
    from adaptedge.trainer.data.datasets import load_dataset
    from tests.support.sized_data import write_data

    data, costs = write_data(tmp_path)
    # a tree HPC: on these linear data --hpc auto keeps logistic regression, as good as the
    # cheap policies, so ADAPT would never escalate
    train_bundle(str(data), method, tmp_path / "b", target="label", costs=costs, quick=True,
                 progress=False, hpc_kind="hgb")
    ds = load_dataset(str(data), target="label", costs=costs)
    X, y = ds.split("test")
    sizes = ds.split_sizes("test")
    assert sizes is not None
    manifest = verify(tmp_path / "b")
    assert manifest.size_dependent
    seen: set[str] = set()
    for point in manifest.operating_points:
        seen |= assert_same_decisions(tmp_path / "b", X, y, point.name, sizes=sizes)
    # PolyDom's graphs answer on the device; ADAPT escalates (the size on the wire)
    assert "cloud" in seen or method == "polydom"
    at_size = replay(tmp_path / "b", X, y, sizes=sizes, cloud=False).columns.energy_mj
    flat = replay(tmp_path / "b", X, y, cloud=False).columns.energy_mj
    assert list(at_size) != list(flat)  # the sizes were charged


@pytest.mark.parametrize("loss,jitter", [(0.3, 0.0), (0.0, 0.7), (0.25, 0.4)])
def test_network_draws_in_a_batch_match_the_calls(loss: float, jitter: float) -> None:
    from adaptedge.protocol.manifest import LinkSpec

    config = NetworkConfig(rtt_ms=50, jitter=jitter, loss=loss)
    one, many = NetworkModel(config, LinkSpec(), seed=3), NetworkModel(config, LinkSpec(), seed=3)
    calls = [one.round_trip_s(0.0, 10, 10) for _ in range(9000)]
    uniform, normal = many.take_draws(9000)
    import math

    batch = [None if loss and u < loss else 0.05 * (math.exp(jitter * z) if jitter else 1.0)
             for u, z in zip(uniform or [1.0] * 9000, normal or [0.0] * 9000, strict=True)]
    assert calls == batch


@pytest.mark.slow
def test_boosted_cstc_bundle(tmp_path: Path) -> None:
    """CSTC on boosted-tree features: tree-ensemble nodes, each visit charging its compute."""
    from sklearn.naive_bayes import GaussianNB

    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.export.bundle import export_bundle
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.registry import MethodOptions, get_method

    dataset = load_dataset("wall-robot")
    hpc = fit_hpc(dataset, kind=GaussianNB(), cache=False)
    graphs = get_method("cstc")(dataset, hpc, MethodOptions(quick=True, extra={
        "features": "boosted", "lambdas": "0.01", "sweeps": "1", "trees": "5", "depth": "2"}))
    manifest = export_bundle(tmp_path / "cstc", dataset, hpc, graphs)
    X, y = dataset.split("test")
    routed = [p.name for p in manifest.operating_points
              if any(n.compute for n in manifest.policies[p.policy].nodes.values())
              and any(a.kind == "escalate" for n in manifest.policies[p.policy].nodes.values()
                      for a in n.actions)]
    assert routed, "no boosted point with a compute cost and an escalation"
    seen = assert_same_decisions(tmp_path / "cstc", X[:500], y[:500], routed[-1])
    assert "cloud" in seen
