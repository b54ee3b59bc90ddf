"""Every long method prints progress lines when piped (stage, done/total, elapsed, ETA)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.trainer.api import train_bundle


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(160, 4))
    y = (X[:, 0] + 0.7 * X[:, 1] + 0.4 * X[:, 2] + 0.3 * rng.normal(size=160) > 0).astype(int)
    path = tmp_path_factory.mktemp("progress") / "d.csv"
    path.write_text("a,b,c,d,label\n" + "".join(
        ",".join(f"{v:.4f}" for v in X[i]) + f",{y[i]}\n" for i in range(len(y))))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("method", ["dag", "cstc", "cscc", "polydom", "greedy", "greedy-acc",
                                    "greedy-cost"])
def test_method_prints_progress_when_piped(method: str, data: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ADAPTEDGE_PROGRESS_EVERY", "0")
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path / "cache"))
    train_bundle(str(data), method, tmp_path / "bundle", target="label", quick=True,
                 hpc_kind="logistic", progress=True)
    lines = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith(f"[adaptedge] {method}")]
    assert lines, f"{method} printed no progress line"
    assert any("/" in line and "elapsed" in line and "ETA" in line for line in lines), lines
