"""``adaptedge`` catches every package's error family once: one line on stderr, exit status 2,
no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.cli.main import main, one_line
from adaptedge.cloud.errors import CloudError
from adaptedge.edge.errors import EdgeError
from tests.support.dataset_bundle import build_dataset_bundle


def fails_in_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The single stderr line of a command that must fail with status 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("adaptedge: warning")]
    assert len(lines) == 1 and lines[0].startswith("adaptedge: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture()
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    build_dataset_bundle(root, "letter-binary")
    return root


def test_an_edge_error_is_one_line(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = fails_in_one_line(["edge", "run", "--bundle", str(bundle), "--replay",
                              "letter-binary", "--operating-point", "nope"], capsys)
    assert "no operating point 'nope'" in line


def test_a_cloud_error_is_one_line(bundle: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-password"
    line = fails_in_one_line(["cloud", "serve", "--bundle", str(bundle), "--broker",
                              "mqtt://127.0.0.1:1", "--username", "worker",
                              "--password-file", str(missing)], capsys)
    assert f"cannot read the password file {missing}" in line


def test_a_trainer_error_is_one_line(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = fails_in_one_line(["evaluate", "--bundle", str(bundle), "--data",
                              "no-such-dataset"], capsys)
    assert "no-such-dataset" in line


def test_a_simulator_error_is_one_line(bundle: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "bad.toml"
    scenario.write_text("[devices]\ncount = 'many'\n")
    line = fails_in_one_line(["simulate", "--bundle", str(bundle), "--data", "letter-binary",
                              "--scenario", str(scenario), "--report",
                              str(tmp_path / "report")], capsys)
    assert str(scenario) in line


def test_a_message_of_several_lines_prints_as_one() -> None:
    assert one_line(CloudError("broker refused\n  check --username\n")) == \
        "broker refused; check --username"
    assert one_line(EdgeError()) == "EdgeError"
