"""``adaptedge simulate`` from the command line (replay mode) and its user errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main
from adaptedge.protocol import Manifest


def _csv(path: Path, n: int = 400) -> Path:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + X[:, 2] > 0).astype(int)
    lines = ["a0,a1,b0,target"] + [",".join(f"{v:.5f}" for v in r) + f",{t}"
                                    for r, t in zip(X, y, strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_simulate_writes_a_report(toy_bundle: tuple[Path, Manifest], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    bundle, _ = toy_bundle
    scenario = tmp_path / "s.toml"
    scenario.write_text("seed = 1\n[devices]\ncount = 2\nrate_hz = 40\n[network]\nloss = 0.2\n"
                        "[[network.outages]]\nstart_s = 0.5\nduration_s = 0.5\n")
    code = main(["simulate", "--bundle", str(bundle), "--data", str(_csv(tmp_path / "d.csv")),
                 "--target", "target", "--scenario", str(scenario), "--report",
                 str(tmp_path / "rep"), "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    assert "always cloud (HPC)" in out and "report:" in out
    body = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert body["scenario"]["seed"] == 1
    assert body["summary"]["devices"] == 2
    assert body["summary"]["outages"] == [[0.5, 1.0]]


@pytest.mark.parametrize(("extra", "words"), [
    (["--scenario", "missing.toml"], "does not exist"),
    (["--operating-point", "nope"], "operating point 'nope'"),
    (["--limit", "0"], "--limit"),
])
def test_simulate_user_errors_are_one_line(toy_bundle: tuple[Path, Manifest], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str], extra: list[str],
                                           words: str) -> None:
    bundle, _ = toy_bundle
    code = main(["simulate", "--bundle", str(bundle), "--data", str(_csv(tmp_path / "d.csv")),
                 "--target", "target", "--report", str(tmp_path / "rep"), *extra])
    assert code == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_simulate_refuses_data_of_another_shape(toy_bundle: tuple[Path, Manifest],
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    bundle, _ = toy_bundle
    code = main(["simulate", "--bundle", str(bundle), "--data", "wall-robot", "--report",
                 str(tmp_path / "rep")])
    assert code == 2
    assert "features" in capsys.readouterr().err


def test_simulate_refuses_a_device_bundle_in_one_line(toy_bundle: tuple[Path, Manifest],
                                                      tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from adaptedge.protocol.device_bundle import write_device_bundle

    write_device_bundle(*toy_bundle, tmp_path / "dev")
    code = main(["simulate", "--bundle", str(tmp_path / "dev"), "--data",
                 str(_csv(tmp_path / "d.csv")), "--target", "target", "--report",
                 str(tmp_path / "rep"), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a device bundle" in err and "a replay needs the full " \
        "bundle it was cut from" in err
