"""Reports: report.json/report.md and PNGs that open; the outage shows in them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adaptedge.protocol import Manifest
from adaptedge.simulator.network import NetworkConfig, Outage
from adaptedge.simulator.report import evaluate, summary_table, write_report
from adaptedge.simulator.scenario import DevicesConfig, Scenario

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_pngs_open(paths: list[Path]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg

    for path in paths:
        assert path.read_bytes()[:8] == PNG_SIGNATURE, path
        image = mpimg.imread(path)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


@pytest.mark.slow
def test_report_files_and_outage(toy_bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    bundle, _ = toy_bundle
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    scenario = Scenario(seed=1, devices=DevicesConfig(count=1, rate_hz=50),
                        network=NetworkConfig(outages=(Outage(2.0, 2.0),)))
    data = evaluate(bundle, X, y, scenario=scenario, compare=[bundle])
    paths = write_report(data, tmp_path / "rep")
    body = json.loads(paths["json"].read_text())
    assert body["summary"]["decisions"] == 300
    labels = [p["label"] for p in body["frontier"]]
    assert {"gate", "walk", "always cloud (HPC)"} <= set(labels)
    assert any(label.startswith("always local (LPC)") for label in labels)
    effect = body["outage_effect"]
    assert 80 <= effect["decisions_in_outage"] <= 120  # 2 s at 50 Hz, minus queueing drift
    assert effect["degraded_rate_in_outage"] > effect["degraded_rate_outside"]
    md = paths["markdown"].read_text()
    assert "## Outages" in md and "2-4 s" in md
    pngs = [tmp_path / "rep" / name for name in body["plots"].values()]
    assert len(pngs) == 4
    assert_pngs_open(pngs)
    table = summary_table(body)
    assert "always cloud" in table and "p99" in table
    hpc = body["baselines"]["hpc_always"]
    assert hpc["sent_rate"] == 1.0
    assert body["baselines"]["lpc_always"]["sent_rate"] == 0.0
    cost = body["summary"]["cost_per_decision"]
    assert cost["energy_mj"] == pytest.approx(cost["sensor_energy_mj"] + cost["link_energy_mj"]
                                              + cost["idle_energy_mj"])
