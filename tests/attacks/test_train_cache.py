"""Issue 15 item 5: the HPC cache key covers everything that shapes the fit or its manifest
entry; a cached HPC fitted under another sensor grouping is never reused as is."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from adaptedge.protocol.manifest import SensorSpec
from adaptedge.trainer import hpc as hpc_module
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.hpc import fit_hpc

COSTS = """weights = "energy"
[[sensor]]
name = "s01"
features = ["f0", "f1"]
energy_mj = 1.0
[[sensor]]
name = "s23"
features = ["f2", "f3"]
energy_mj = 3.0
"""


def _csv(path: Path, rows: int = 150) -> Path:
    rng = random.Random(0)
    lines = ["f0,f1,f2,f3,label"]
    for i in range(rows):
        c = i % 2
        cells = [f"{rng.gauss(c * (j + 1) * 0.5, 1.0):.3f}" for j in range(4)]
        lines.append(",".join(cells) + f",{'ab'[c]}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _train(tmp_path: Path, out: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adaptedge.cli.main", "train", "--data", "d.csv", "--target",
         "label", "--method", "l1", "--quick", "--no-progress", "--hpc", "logistic",
         "--jobs", "1", "--out", out, *extra],  # one process: no worker pool to start
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "ADAPTEDGE_CACHE_DIR": str(tmp_path / "cache")})


@pytest.mark.slow
def test_training_with_costs_after_training_without(tmp_path: Path) -> None:
    """The reported failure: the second run died with ``hpc.sensors: unknown sensor``."""
    _csv(tmp_path / "d.csv")
    (tmp_path / "costs.toml").write_text(COSTS)
    first = _train(tmp_path, "plain")
    assert first.returncode == 0, first.stderr
    second = _train(tmp_path, "costed", "--costs", "costs.toml")
    assert second.returncode == 0, second.stderr
    assert "s01" in (tmp_path / "costed" / "manifest.json").read_text()


@pytest.mark.parametrize("change", ["sensors", "classes", "feature_names"])
def test_the_key_changes_with_what_shapes_the_manifest_entry(tmp_path: Path, change: str) -> None:
    base = load_dataset(str(_csv(tmp_path / "d.csv")), target="label")
    if change == "sensors":
        other = replace(base, sensors=(SensorSpec("all", (0, 1, 2, 3)),))
    elif change == "classes":
        other = replace(base, classes=("A", "B"))
    else:
        other = replace(base, feature_names=("g0", "g1", "g2", "g3"))
    assert hpc_module._cache_path(base, "hgb", 0) != hpc_module._cache_path(other, "hgb", 0)


def test_a_cached_model_carries_the_current_sensors(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path / "cache"))
    base = load_dataset(str(_csv(tmp_path / "d.csv")), target="label")
    grouped = replace(base, sensors=(SensorSpec("left", (0, 1)), SensorSpec("right", (2, 3))))
    assert fit_hpc(base, kind="logistic").sensors == ("f0", "f1", "f2", "f3")
    assert fit_hpc(grouped, kind="logistic").sensors == ("left", "right")
    assert fit_hpc(grouped, kind="logistic").sensors == ("left", "right")  # now cached
