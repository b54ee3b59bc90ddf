"""Per-decision budgets end to end: a PolyDom (and a Greedy) bundle trained on data whose
costs grow with the item's size; ``evaluate --budget`` and the device agree item by item and
never overspend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from adaptedge.trainer.data.datasets import load_dataset
from tests.support.sized_data import write_data


@pytest.fixture(scope="module", params=["polydom", "greedy", "polydom-covering"])
def indexed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Path, Path, Path, str]:
    from adaptedge.trainer.api import train_bundle

    folder = tmp_path_factory.mktemp(request.param)
    data, costs = write_data(folder)
    method, _, covering = request.param.partition("-")
    train_bundle(str(data), method, folder / "bundle", target="label", costs=costs,
                 quick=True, progress=False,
                 extra={"epsilon": 0.0, "covering": "1" if covering else "0"}
                 if method == "polydom" else None)
    return data, costs, folder / "bundle", method


def test_bundle_carries_the_index_and_every_model(indexed: tuple[Path, Path, Path, str]
                                                  ) -> None:
    bundle, method = indexed[2], indexed[3]
    raw = json.loads((bundle / "manifest.json").read_text())
    index = raw["budget_index"]
    assert index["kind"] == ("polydom" if method == "polydom" else "greedy")
    points = {p["name"] for p in raw["operating_points"]}
    assert {m["point"] for m in index["models"]} == points


def test_device_and_evaluate_agree_and_never_overspend(indexed: tuple[Path, Path, Path, str]
                                                      ) -> None:
    from adaptedge.edge import EdgeRuntime
    from adaptedge.edge.sized import OverBudget
    from adaptedge.trainer.policy.budgeted import budget_outcomes
    from adaptedge.trainer.policy.oracle import BundleRunner

    data, costs, bundle, _ = indexed
    ds = load_dataset(str(data), target="label", costs=costs)
    X, y = ds.split("test")
    sizes = ds.split_sizes("test")
    assert sizes is not None
    runner = BundleRunner.from_dir(bundle)
    n_points = len(runner.manifest.operating_points)
    with EdgeRuntime.load(bundle, max_resident_policies=n_points) as rt:
        for budget in (0.5, 3.0, 8.0, 30.0):
            correct, cost, fit = budget_outcomes(runner, X, y, sizes, budget)
            assert (cost <= budget).all() and fit.all()
            for i in range(0, len(X), 7):
                d = rt.predict_row(X[i], size=float(sizes[i]), budget=budget)
                assert d.cost.scalar == pytest.approx(cost[i], rel=1e-12, abs=1e-12)
                assert d.cost.scalar <= budget and (d.label_index == y[i]) == correct[i]
        with pytest.raises(OverBudget) as info:
            rt.predict_row(X[0], size=float(sizes[0]), budget=-1.0)
        assert info.value.cheapest >= 0.0
        with pytest.raises(Exception, match="pass size="):
            rt.predict_row(X[0], budget=3.0)


def test_evaluate_cli_budget_json(indexed: tuple[Path, Path, Path, str]) -> None:
    data, costs, bundle, _ = indexed
    out = subprocess.run(
        [sys.executable, "-m", "adaptedge.cli", "evaluate", "--bundle", str(bundle), "--data",
         str(data), "--target", "label", "--costs", str(costs), "--budget", "3", "--json"],
        capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(out.stdout)
    assert report["over_budget"] == 0 and report["no_model"] == 0
    assert 0.0 <= report["mean_cost"] <= 3.0 and 0.0 <= report["accuracy"] <= 1.0
    assert np.isfinite(report["accuracy"])


def test_budget_needs_an_index(tmp_path: Path) -> None:
    from adaptedge.edge import EdgeRuntime
    from adaptedge.edge.errors import EdgeError
    from tests.support.toy_bundle import build_toy_bundle

    build_toy_bundle(tmp_path / "toy")
    with EdgeRuntime.load(tmp_path / "toy") as rt, pytest.raises(EdgeError, match="no budget"):
        rt.predict_row(np.zeros(len(rt.manifest.feature_names)), budget=1.0)
