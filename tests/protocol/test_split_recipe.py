"""The split travels with the bundle (issue 20 item 5): the manifest records dataset, seed,
fractions and a digest of the row assignment; ``adaptedge evaluate`` without ``--seed`` redraws
that split and refuses a mismatching one with one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adaptedge.cli.main import main
from adaptedge.protocol.bundle import verify
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import Manifest
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.data.splits import split_recipe
from adaptedge.trainer.methods import registry as methods
from adaptedge.trainer.policy.graph import Graph
from adaptedge.trainer.policy.oracle import BundleRunner
from tests.support.toy_bundle import build_toy_bundle
from tests.trainer.export.test_bundle import heart_policies

TINY = "test-tiny-split"


def _tiny(dataset: Any, hpc: Any, options: methods.MethodOptions) -> list[Graph]:
    return heart_policies(dataset)


@pytest.fixture(scope="module")
def seed3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "heart-s3"
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(methods.METHOD_MODULES, TINY, __name__)
        mp.setitem(methods._REGISTRY, TINY, _tiny)
        mp.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
        assert main(["train", "--data", "heart", "--method", TINY, "--hpc", "hgb", "--seed", "3",
                     "--no-progress", "--out", str(out)]) == 0
    return out


def test_the_manifest_records_the_split(seed3: Path) -> None:
    recipe = verify(seed3).split
    assert recipe is not None
    assert (recipe.dataset, recipe.seed) == ("heart", 3)
    assert sum(recipe.fractions) == pytest.approx(1.0, abs=1e-5)
    assert recipe.digest == split_recipe(load_dataset("heart", seed=3), 3).digest
    assert recipe.digest != split_recipe(load_dataset("heart", seed=0), 0).digest


def test_evaluate_without_seed_uses_the_bundles_split(
        seed3: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--bundle", str(seed3), "--data", "heart", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    runner = BundleRunner.from_dir(seed3)
    m = verify(seed3)
    by_seed = {}
    for seed in (0, 3):
        d = load_dataset("heart", seed=seed)
        by_seed[seed] = [runner.evaluate(p.policy, d.X_test, d.y_test).accuracy
                         for p in m.operating_points]
    assert by_seed[0] != by_seed[3]  # the two splits tell apart
    assert [p["accuracy"] for p in report["points"]] == pytest.approx(by_seed[3])


def test_evaluate_refuses_another_split_in_one_line(
        seed3: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--bundle", str(seed3), "--data", "heart", "--seed", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("adaptedge: error:") and "\n" not in err
    assert "seed 3" in err and "--seed 3" in err
    assert main(["evaluate", "--bundle", str(seed3), "--data", "heart", "--seed", "3",
                 "--json"]) == 0


def test_old_bundles_without_a_split_still_load(tmp_path: Path) -> None:
    m = build_toy_bundle(tmp_path / "toy")
    assert m.split is None and "split" not in m.to_dict()
    raw = m.to_dict()
    assert Manifest.from_dict(raw).split is None
    raw["split"] = {"dataset": "heart", "seed": 3, "fractions": [0.6, 0.2, 0.2], "digest": "ab"}
    assert Manifest.from_dict(raw).split is not None
    raw["split"]["seed"] = "3"
    with pytest.raises(BundleError, match=r"split\.seed"):
        Manifest.from_dict(raw)


@pytest.mark.slow
def test_simulate_and_edge_replay_use_the_bundles_split(
        seed3: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runner = BundleRunner.from_dir(seed3)
    m = verify(seed3)
    policy = {p.name: p.policy for p in m.operating_points}[m.default_operating_point]
    accuracy = {seed: runner.evaluate(policy, d.X_test, d.y_test).accuracy
                for seed in (0, 3) for d in [load_dataset("heart", seed=seed)]}
    assert accuracy[0] != accuracy[3]
    assert main(["simulate", "--bundle", str(seed3), "--data", "heart", "--split", "test",
                 "--report", str(tmp_path / "r"), "--no-progress"]) == 0
    summary = json.loads((tmp_path / "r" / "report.json").read_text())["summary"]
    assert summary["accuracy"] == pytest.approx(accuracy[3])
    journal = tmp_path / "j.jsonl"
    assert main(["edge", "run", "--bundle", str(seed3), "--replay", "heart", "--split", "test",
                 "--json-out", str(journal)]) == 0
    truths = [r["truth"] for r in map(json.loads, journal.read_text().splitlines())
              if r["kind"] == "decision"]
    d3 = load_dataset("heart", seed=3)
    assert truths == [d3.classes[i] for i in d3.y_test]
    d0 = load_dataset("heart", seed=0)
    assert truths != [d0.classes[i] for i in d0.y_test]
    capsys.readouterr()
