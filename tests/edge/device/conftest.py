"""A letter-binary bundle and its test rows, for the device's run."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.edge.device import ReplayRows
from adaptedge.protocol import Manifest
from adaptedge.trainer.data.datasets import load_dataset
from tests.support.dataset_bundle import build_dataset_bundle

N_ROWS = 40


@pytest.fixture()
def letter(tmp_path: Path) -> tuple[Path, Manifest, ReplayRows]:
    bundle = tmp_path / "bundle"
    manifest = build_dataset_bundle(bundle, "letter-binary")
    data = load_dataset("letter-binary")
    rows = ReplayRows(data.X_test[:N_ROWS], [data.classes[int(t)] for t in data.y_test[:N_ROWS]],
                      data.feature_names, source="letter-binary", split="test")
    return bundle, manifest, rows
