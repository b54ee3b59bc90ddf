"""Hardware in the loop for a regression bundle (issue 33): a trained bundle's devices
(``edge run`` processes) escalate through a real mosquitto to ``cloud serve``; every decision
answers the value replay computes for that row (the HPC's on the escalated ones), and the
report scores the run in the target's unit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adaptedge.protocol.bundle import verify
from adaptedge.simulator.hil import HilOptions, run_hil
from adaptedge.simulator.replay import replay
from adaptedge.simulator.report import evaluate, write_report
from adaptedge.simulator.scenario import DevicesConfig, Scenario
from adaptedge.trainer.data.datasets import load_dataset
from tests.support.tiny_regression import train_tiny_regression

pytestmark = pytest.mark.broker


@pytest.mark.slow
def test_hil_regression_answers_replay_values(tmp_path: Path) -> None:
    data, bundle = train_tiny_regression(tmp_path, "confidence", costs=True)
    m = verify(bundle)
    point = max(m.operating_points, key=lambda p: p.escalation_rate)
    assert point.escalation_rate > 0
    d = load_dataset(str(data), target="temp", task="regression",
                     costs=tmp_path / "costs.toml")
    X, y = d.X_test, d.targets("test")
    scenario = Scenario(seed=2, devices=DevicesConfig(count=1, rate_hz=100, limit=40),
                        operating_point=point.name)
    hil = run_hil(bundle, str(data), scenario=scenario, truth=y,
                  options=HilOptions(devices=1, broker="mosquitto", target="temp",
                                     workdir=tmp_path / "w", timeout_s=120))
    sim = replay(bundle, X, y, scenario=scenario)
    assert hil.regression and hil.n == sim.n == 40
    assert "cloud" in set(hil.columns.source)
    assert hil.keyed() == sim.keyed()  # sources, escalations, sensors per (device, row)
    order = np.argsort(np.asarray(hil.columns.row))
    np.testing.assert_allclose(hil.values()[order], sim.values(), rtol=1e-6, atol=1e-6)
    assert np.array_equal(hil.targets()[order], y[:40])
    assert hil.errors()["mse"] == pytest.approx(sim.errors()["mse"], rel=1e-5)
    paths = write_report(evaluate(bundle, X, y, scenario=scenario, main=hil), tmp_path / "r")
    body = json.loads(paths["json"].read_text())
    assert body["summary"]["mode"] == "hil" and body["target"]["name"] == "temp"
    assert body["summary"]["mse"] == pytest.approx(hil.errors()["mse"], rel=1e-12)
