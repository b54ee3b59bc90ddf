"""The gas drift scenario, run once per test run: the offline acceptance test reads its summary
and the in-the-loop one replays its early bundle (``train_early`` on batches 1-2, seed 0, the
bundle ``run_hil_scenario`` would train itself), so gas is trained once, not twice."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from tests.support.run_shared import shared_folder


@pytest.fixture(scope="session")
def gas_scenario(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """(folder, summary) of ``run_scenario(folder, DriftConfig(), null_streams=20,
    null_length=2000)``; ``folder / "bundle"`` is the early bundle, as trained."""

    def build(folder: Path) -> None:
        from benchmarks.gas_drift.run import run_scenario
        from benchmarks.gas_drift.stream import DriftConfig

        summary = run_scenario(folder / "run", DriftConfig(), null_streams=20, null_length=2000)
        (folder / "summary.pkl").write_bytes(pickle.dumps(summary))

    folder = shared_folder(tmp_path_factory, "gas-drift", build)
    return folder / "run", pickle.loads((folder / "summary.pkl").read_bytes())
