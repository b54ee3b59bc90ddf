"""Simulator models: network draws, scenarios, the energy model against protocol.costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.protocol import Manifest
from adaptedge.protocol.costs import decision_cost
from adaptedge.protocol.manifest import LinkSpec
from adaptedge.simulator.clock import SimClock
from adaptedge.simulator.energy import EnergyConfig, EnergyModel
from adaptedge.simulator.network import NetworkConfig, NetworkModel, Outage
from adaptedge.simulator.scenario import ScenarioError, load_scenario, scenario_from_dict


def test_clock_only_moves_forward() -> None:
    clock = SimClock()
    clock.advance(0.5)
    clock.advance_to(0.2)
    clock.advance(-1.0)
    assert clock() == 0.5
    assert clock.advance_to(2.0) == 2.0


def test_network_is_seeded_and_honours_outages_and_loss() -> None:
    config = NetworkConfig(rtt_ms=40, jitter=0.5, loss=0.2,
                           outages=(Outage(start_s=10, duration_s=5),))
    a = NetworkModel(config, LinkSpec(), seed=1)
    b = NetworkModel(config, LinkSpec(), seed=1)
    c = NetworkModel(config, LinkSpec(), seed=2)
    draws_a = [a.round_trip_s(t * 0.01, 256, 96) for t in range(2000)]
    draws_b = [b.round_trip_s(t * 0.01, 256, 96) for t in range(2000)]
    draws_c = [c.round_trip_s(t * 0.01, 256, 96) for t in range(2000)]
    assert draws_a == draws_b
    assert draws_a != draws_c
    in_outage = draws_a[1000:1500]
    assert all(d is None for d in in_outage)
    outside = draws_a[:1000] + draws_a[1500:]
    lost = sum(d is None for d in outside) / len(outside)
    assert 0.15 < lost < 0.25
    kept = sorted(d for d in outside if d is not None)
    assert 0.03 < kept[len(kept) // 2] < 0.05  # median round trip near 40 ms


def test_bandwidth_adds_serialisation_time() -> None:
    net = NetworkModel(NetworkConfig(rtt_ms=10, bandwidth_kbps=8), LinkSpec(), seed=0)
    rtt = net.round_trip_s(0.0, 500, 500)
    assert rtt == pytest.approx(0.010 + 1000 / 1000.0)


def test_scenario_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text("""
seed = 4
operating_point = "walk"
[devices]
count = 3
rate_hz = 5
[network]
rtt_ms = 80
loss = 0.1
[[network.outages]]
start_s = 2
duration_s = 1.5
[energy]
idle_mw = 2
""")
    s = load_scenario(path)
    assert s.seed == 4 and s.devices.count == 3 and s.operating_point == "walk"
    assert s.network.outages == (Outage(2.0, 1.5),) and s.network.loss == 0.1
    assert s.energy.idle_mw == 2
    assert scenario_from_dict(s.to_dict()) == s


@pytest.mark.parametrize(("raw", "words"), [
    ({"network": {"los": 0.1}}, "unknown key"),
    ({"network": {"loss": 2}}, "probability"),
    ({"devices": {"count": 0}}, "devices.count"),
    ({"seed": -1}, "seed"),
    ({"network": {"outages": [{"start_s": 1, "duration_s": 0}]}}, "duration_s"),
])
def test_bad_scenarios_are_refused_with_the_key(raw: dict[str, object], words: str) -> None:
    with pytest.raises(ScenarioError, match=words):
        scenario_from_dict(raw)


def test_missing_scenario_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="does not exist"):
        load_scenario(tmp_path / "nope.toml")


def test_energy_model_is_protocol_costs(toy_bundle: tuple[Path, Manifest]) -> None:
    _, manifest = toy_bundle
    model = EnergyModel(manifest)
    for sensors in [(), ("a",), ("a", "b")]:
        for sent in (False, True):
            ref = decision_cost(manifest, sensors, sent)
            got = model.cost(sensors, sent)
            assert got.energy_mj == pytest.approx(ref.energy_mj)
            assert got.money == pytest.approx(ref.money)
            assert got.scalar == pytest.approx(ref.scalar)
            assert got.link_bytes == ref.bytes
            assert got.cloud_calls == int(sent)


def test_energy_overrides_change_the_link(toy_bundle: tuple[Path, Manifest]) -> None:
    _, manifest = toy_bundle
    base = EnergyModel(manifest).cost(("a",), True)
    dear = EnergyModel(manifest, EnergyConfig(tx_mj_per_byte=0.1, idle_mw=3.0))
    cost = dear.cost(("a",), True)
    assert cost.link_energy_mj == pytest.approx(manifest.link.request_bytes * 0.1
                                                + manifest.link.reply_bytes
                                                * manifest.link.rx_energy_mj_per_byte)
    assert cost.sensor_energy_mj == base.sensor_energy_mj
    assert dear.idle_mj(2.0) == 6.0


def test_shipped_scenarios_load() -> None:
    import adaptedge.simulator

    folder = Path(adaptedge.simulator.__file__).resolve().parent / "scenarios"
    files = sorted(folder.glob("*.toml"))
    assert files
    for path in files:
        assert load_scenario(path).name == path.stem
