"""The same ``adaptedge train`` inputs and seed give the same bundle id: wall-clock timings stay
out of the hashed manifest."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.cli.main import main
from adaptedge.protocol.bundle import verify
from tests.support.sized_data import write_data


@pytest.mark.slow
def test_two_identical_train_runs_give_the_same_bundle_id(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path / "cache"))
    data, _ = write_data(tmp_path, n_rows=160)
    ids = []
    for run in ("one", "two"):
        out = tmp_path / run
        assert main(["train", "--data", str(data), "--target", "label", "--method",
                     "adapt-gbrt", "--quick", "--hpc", "hgb", "--no-progress",
                     "--out", str(out)]) == 0
        manifest = verify(out)
        assert not {"train_seconds", "hpc_seconds"} & set(manifest.metadata)
        ids.append(manifest.bundle_id)
    assert ids[0] == ids[1]
    assert "trained in" in capsys.readouterr().out
