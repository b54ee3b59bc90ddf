"""Costs that grow with the item's size: the costs file, the manifest, the one cost rule, the
trainer walk, the oracle (``evaluate``), the edge runtime and replay charge each item its own."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adaptedge.protocol.costs import cost_columns, decision_cost, decision_costs, sensor_cost
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import CostWeights, LinkSpec, Manifest, SensorSpec
from adaptedge.trainer.data.costs import CostsError, load_costs
from adaptedge.trainer.data.datasets import load_dataset
from tests.support.sized_data import COSTS, write_data


@pytest.fixture(scope="module")
def sized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    from adaptedge.trainer.api import train_bundle

    folder = tmp_path_factory.mktemp("sized")
    data, costs = write_data(folder)
    train_bundle(str(data), "static", folder / "bundle", target="label", costs=costs,
                 quick=True, progress=False)
    return data, costs, folder / "bundle"


def test_costs_file_polynomials_and_size_column(tmp_path: Path) -> None:
    data, costs = write_data(tmp_path, 60)
    ds = load_dataset(str(data), target="label", costs=costs)
    assert ds.feature_names == ("a", "b", "c", "d")  # the size column is never a feature
    assert ds.sizes is not None and ds.X_train.shape[1] == 4
    s1, s2, s3 = ds.sensors
    assert s1.size_poly == (("energy_mj", (0.5, 0.02, 0.0001)),)
    assert s2.size_poly == (("latency_ms", (1.0, 0.1)),) and s3.size_poly == ()
    median = float(np.median(ds.sizes[0]))
    assert s1.energy_mj == pytest.approx(0.5 + 0.02 * median + 0.0001 * median ** 2)
    assert s3.energy_mj == 0.2


@pytest.mark.parametrize("edit, message", [
    ("energy_mj = [0.5, -0.02, 0.0001]", "must be >= 0"),
    ("energy_mj = []", "1..8 polynomial coefficients"),
    ('energy_mj = [0.5, "x"]', "finite number"),
])
def test_bad_polynomials_are_clear_errors(tmp_path: Path, edit: str, message: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(COSTS.replace("energy_mj = [0.5, 0.02, 0.0001]", edit))
    with pytest.raises(CostsError, match=message):
        load_costs(p, ["a", "b", "c", "d", "n"])


def test_polynomial_needs_a_size_column(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text(COSTS.replace('[size]\ncolumn = "n"\n', ""))
    with pytest.raises(CostsError, match=r"needs the items' sizes"):
        load_costs(p, ["a", "b", "c", "d"])
    data, _ = write_data(tmp_path, 30)
    p.write_text(COSTS.replace('column = "n"', 'column = "size"'))
    with pytest.raises(ValueError, match="size column 'size' is not in the data"):
        load_dataset(str(data), target="label", costs=p)


def test_constant_manifest_unchanged(tmp_path: Path) -> None:
    from tests.support.toy_bundle import build_toy_bundle

    build_toy_bundle(tmp_path / "toy")
    raw = json.loads((tmp_path / "toy" / "manifest.json").read_text())
    manifest = Manifest.from_dict(raw)
    assert not manifest.size_dependent
    assert manifest.to_dict() == raw  # no size field appears in a constant-cost bundle
    assert all("size_poly" not in s for s in manifest.to_dict()["sensors"])


@pytest.mark.slow
def test_manifest_polynomials_round_trip_and_refuse_negatives(sized: tuple[Path, Path, Path]
                                                              ) -> None:
    raw = json.loads((sized[2] / "manifest.json").read_text())
    manifest = Manifest.from_dict(raw)
    assert manifest.size_dependent and manifest.to_dict() == raw
    raw["sensors"][0]["size_poly"]["energy_mj"][1] = -1.0
    with pytest.raises(BundleError, match=r"size_poly\.energy_mj"):
        Manifest.from_dict(raw)


def test_one_cost_rule_per_item() -> None:
    sensors = (SensorSpec("a", (0,), energy_mj=2.0, size_poly=(("energy_mj", (0.5, 0.02, 1e-4)),)),
               SensorSpec("b", (1,), energy_mj=1.0, latency_ms=3.0,
                          size_poly=(("latency_ms", (1.0, 0.1)),)),
               SensorSpec("c", (2,), energy_mj=0.3))
    weights, link = CostWeights(energy_mj=1.0, latency_ms=0.5, uniform=0.25), LinkSpec()
    rng = np.random.default_rng(1)
    sizes = rng.uniform(0, 500, size=50)
    read = rng.random((50, 3)) < 0.5
    esc = rng.random(50) < 0.3
    per_item, link_row = cost_columns(sensors, link, weights, sizes)
    batch = decision_costs(read, esc, per_item, link_row)
    for i in range(50):
        one = decision_cost_of(sensors, weights, link, read[i], bool(esc[i]), sizes[i])
        assert batch[i] == pytest.approx([one.scalar, one.energy_mj, one.latency_ms, one.money,
                                          one.bytes], rel=1e-12)
    assert sensor_cost(sensors[0], weights, 100.0).energy_mj == pytest.approx(0.5 + 2 + 1)
    assert sensor_cost(sensors[0], weights).energy_mj == 2.0  # no size: the median-size cost


def decision_cost_of(sensors: tuple[SensorSpec, ...], weights: CostWeights, link: LinkSpec,
                     read: np.ndarray, escalated: bool, size: float):
    from adaptedge.protocol.costs import CostBreakdown, link_cost

    total = CostBreakdown()
    for s, spec in enumerate(sensors):
        if read[s]:
            total = total + sensor_cost(spec, weights, size)
    return total + link_cost(link, weights) if escalated else total


def test_trainer_walk_charges_each_item() -> None:
    from adaptedge.trainer.policy.walk import CostTable

    table = CostTable(("a", "b"), np.array([1.0, 2.0]), 0.5, np.array([True, True]),
                      size_poly=np.array([[1.0, 0.1], [2.0, 0.0]]))
    read = np.array([[True, False], [True, True]])
    costs = decision_costs(read, np.array([False, True]), table.item_costs(np.array([10.0, 30.0])),
                           table.link_cost)[:, 0]
    assert costs.tolist() == pytest.approx([2.0, 4.0 + 2.0 + 0.5])
    assert table.item_costs(None) is table.sensor_costs


def test_evaluate_runtime_and_replay_charge_the_same_per_item(sized: tuple[Path, Path, Path]
                                                               ) -> None:
    from adaptedge.edge import EdgeRuntime
    from adaptedge.simulator.replay import replay
    from adaptedge.trainer.policy.oracle import BundleRunner

    data, costs, bundle = sized
    ds = load_dataset(str(data), target="label", costs=costs)
    X, y = ds.split("test")
    sizes = ds.split_sizes("test")
    assert sizes is not None
    runner = BundleRunner.from_dir(bundle)
    manifest = runner.manifest
    point = max(manifest.operating_points, key=lambda p: p.cost)
    oracle = runner.evaluate(point.policy, X, y, sizes)
    flat = runner.evaluate(point.policy, X, y)
    assert not np.allclose(oracle.energy_mj, flat.energy_mj)  # sizes change what is charged
    with EdgeRuntime.load(bundle, operating_point=point.name) as rt:
        decisions = [rt.predict_row(X[i], size=float(sizes[i])) for i in range(len(X))]
        counters = rt.counters
    energy = np.array([d.cost.energy_mj for d in decisions])
    scalar = np.array([d.cost.scalar for d in decisions])
    np.testing.assert_allclose(energy, oracle.energy_mj, rtol=1e-12)
    np.testing.assert_allclose(scalar, oracle.cost, rtol=1e-12)
    assert counters["energy_mj"] == pytest.approx(float(energy.sum()))
    run = replay(bundle, X, y, operating_point=point.name, cloud=False, sizes=sizes)
    np.testing.assert_allclose(np.array(run.columns.energy_mj), oracle.energy_mj, rtol=1e-12)
    one = decision_cost(manifest, decisions[0].sensors_read, False, float(sizes[0]))
    assert one.energy_mj == pytest.approx(energy[0], rel=1e-12)


def test_size_travels_on_the_wire_and_old_requests_are_unchanged() -> None:
    import msgpack

    from adaptedge.protocol.codec import decode, encode
    from adaptedge.protocol.errors import ProtocolError
    from adaptedge.protocol.messages import InferenceRequest

    plain = InferenceRequest(1, "d", "b", 0.0, 1.0, b"\0\0\x80\x3f", b"\x01", -1, 0.0)
    assert encode(plain).hex().startswith("9a")  # ten fields, as before sizes existed
    assert decode(encode(plain)).size is None  # type: ignore[union-attr]
    sized_request = InferenceRequest(1, "d", "b", 0.0, 1.0, b"\0\0\x80\x3f", b"\x01", 0, 0.9,
                                     size=128.0)
    wire = encode(sized_request)
    assert wire.hex().startswith("9b") and decode(wire) == sized_request
    fields = msgpack.unpackb(wire)
    for bad in (-1.0, float("nan"), "big"):
        with pytest.raises(ProtocolError, match="size"):
            decode(msgpack.packb([*fields[:-1], bad]))


def test_escalation_sends_the_size_when_the_hpc_cost_grows(sized: tuple[Path, Path, Path]
                                                           ) -> None:
    from adaptedge.edge.escalation import Escalation

    data, costs, bundle = sized
    ds = load_dataset(str(data), target="label", costs=costs)
    X, _ = ds.split("test")
    manifest = Manifest.from_dict(json.loads((bundle / "manifest.json").read_text()))
    assert any(manifest.sensor(s).size_poly for s in manifest.hpc.sensors)

    esc = Escalation(manifest, uplink=None, outbox=None, counters={"escalations": 0.0},
                     clock=lambda: 0.0, device_id="d", request_id_start=1)
    request = esc._request(X[0], 0b111, 0, 0.5, 42.0)
    assert request.size == 42.0


@pytest.mark.slow
@pytest.mark.broker
def test_hil_charges_each_item_like_evaluate(sized: tuple[Path, Path, Path],
                                             tmp_path: Path) -> None:
    """Real mosquitto, real device process: per-item energy equals the oracle's."""
    from adaptedge.simulator.hil import HilOptions, run_hil
    from adaptedge.simulator.scenario import DevicesConfig, Scenario
    from adaptedge.trainer.policy.oracle import BundleRunner

    data, costs, bundle = sized
    ds = load_dataset(str(data), target="label", costs=costs)
    X, y = ds.split("test")
    runner = BundleRunner.from_dir(bundle)
    point = runner.manifest.operating_point(runner.manifest.default_operating_point)
    oracle = runner.evaluate(point.policy, X, y, ds.split_sizes("test"))
    scenario = Scenario(seed=2, devices=DevicesConfig(count=1, rate_hz=200, limit=30))
    hil = run_hil(bundle, str(data), scenario=scenario, truth=y,
                  options=HilOptions(devices=1, broker="mosquitto", workdir=tmp_path,
                                     timeout_s=120, target="label", costs=str(costs)))
    rows = np.asarray(hil.columns.row)
    np.testing.assert_allclose(np.asarray(hil.columns.energy_mj), oracle.energy_mj[rows],
                               rtol=1e-12)
    assert len(rows) == 30
