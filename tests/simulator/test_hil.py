"""Hardware in the loop against replay: real broker, cloud and edge processes on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adaptedge.simulator.hil import HilOptions, run_hil
from adaptedge.simulator.network import NetworkConfig, Outage
from adaptedge.simulator.records import RunResult
from adaptedge.simulator.replay import replay
from adaptedge.simulator.report import evaluate, write_report
from adaptedge.simulator.scenario import DevicesConfig, Scenario
from adaptedge.trainer.data.datasets import load_dataset
from tests.support.dataset_bundle import build_dataset_bundle

DATA = "wall-robot"
pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hil") / "bundle"
    build_dataset_bundle(out, DATA, n_sensors=4, escalate=0.4)
    return out


@pytest.fixture()
def children_before() -> set[int]:
    """This process's children before the test (a CLI run earlier in the session may keep
    joblib's idle workers alive): the HIL run must leave none of its own behind."""
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)}


def _children_gone(run: RunResult, before: set[int]) -> None:
    import psutil

    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert left == [], "HIL left child processes behind"


@pytest.mark.slow
@pytest.mark.parametrize("broker", ["mosquitto", "amqtt"])
def test_replay_and_hil_make_the_same_decisions(bundle: Path, tmp_path: Path, broker: str,
                                                children_before: set[int]) -> None:
    X, y = load_dataset(DATA).split("test")
    scenario = Scenario(seed=3, devices=DevicesConfig(count=2, rate_hz=100, limit=80))
    hil = run_hil(bundle, DATA, scenario=scenario, truth=y,
                  options=HilOptions(devices=2, broker=broker, workdir=tmp_path, timeout_s=120))
    _children_gone(hil, children_before)
    sim = replay(bundle, X, y, scenario=scenario)
    assert hil.n == sim.n == 160
    assert set(hil.columns.source) == {"local", "cloud"}
    assert hil.keyed() == sim.keyed()  # labels, sources, escalation, sensors per (device, row)
    e_hil, e_sim = float(np.sum(hil.columns.energy_mj)), float(np.sum(sim.columns.energy_mj))
    assert abs(e_hil - e_sim) <= 0.01 * e_sim


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["proxy", "pause"])
def test_outage_every_request_gets_exactly_one_answer(bundle: Path, tmp_path: Path, mode: str,
                                                      children_before: set[int]) -> None:
    X, y = load_dataset(DATA).split("test")
    limit, rate = 200, 50.0
    scenario = Scenario(seed=1, devices=DevicesConfig(count=1, rate_hz=rate, limit=limit),
                        network=NetworkConfig(outages=(Outage(1.0, 1.5),)))
    hil = run_hil(bundle, DATA, scenario=scenario, truth=y,
                  options=HilOptions(devices=1, broker="mosquitto", workdir=tmp_path / "w",
                                     timeout_s=120, outage_mode=mode))  # type: ignore[arg-type]
    _children_gone(hil, children_before)
    assert sorted(hil.columns.row) == list(range(limit))  # none lost, none twice
    escalated = np.asarray(hil.columns.escalated)
    sources = hil.sources()
    assert set(sources[escalated]) <= {"cloud", "degraded"}
    assert (sources[~escalated] == "local").all()
    t = np.asarray(hil.columns.t_start)
    start, end = hil.outages[0]
    inside = (t >= start + 0.05) & (t < end)
    assert (sources[inside & escalated] == "degraded").mean() > 0.5
    assert (sources[(t < start - 0.1) & escalated] == "cloud").all()
    assert hil.outages and hil.outages[0][1] - hil.outages[0][0] == pytest.approx(1.5)
    if mode == "proxy":
        assert hil.extra["proxy_cuts"] == 1
    report = write_report(evaluate(bundle, X, y, scenario=scenario, main=hil), tmp_path / "rep")
    body = json.loads(report["json"].read_text())
    effect = body["outage_effect"]
    assert effect["decisions_in_outage"] > 0
    assert effect["degraded_rate_in_outage"] > effect["degraded_rate_outside"]
    assert "## Outages" in report["markdown"].read_text()


@pytest.mark.slow
def test_devices_on_remote_sensors_decide_like_replay(bundle: Path, tmp_path: Path,
                                                     children_before: set[int]) -> None:
    """Devices that read every sensor over MQTT from the simulator (as real hardware would)
    make the replay's decisions; the sensor latency is really waited for."""
    X, y = load_dataset(DATA).split("test")
    scenario = Scenario(seed=4, devices=DevicesConfig(count=2, rate_hz=50, limit=40))
    hil = run_hil(bundle, DATA, scenario=scenario, truth=y, rows=X,
                  options=HilOptions(devices=2, broker="mosquitto", workdir=tmp_path,
                                     timeout_s=120, remote_sensors=True))
    _children_gone(hil, children_before)
    sim = replay(bundle, X, y, scenario=scenario)
    assert hil.n == sim.n == 80
    assert hil.keyed() == sim.keyed()
    local = np.asarray(hil.columns.source) == "local"
    nominal = np.asarray(sim.columns.latency_ms)[local]
    assert (np.asarray(hil.columns.latency_ms)[local] >= 0.9 * nominal).all()
