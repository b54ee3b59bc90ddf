"""``adaptedge train --task regression``: a method that cannot learn a regression is refused in
one line naming those that can; those say in one line that the bundle is not written yet.
Nothing is trained and nothing is written (the refusal comes before the HPC)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.cli.main import main


@pytest.mark.parametrize("argv", [
    ["--data", "gas-concentration", "--method", "adapt-gbrt"],
    ["--data", "heart", "--task", "regression", "--method", "dag"],
])
def test_methods_without_regression_are_refused_naming_those_with(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", *argv, "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not support --task regression" in err and "cstc, greedy-miser" in err
    assert "\n" not in err and not (tmp_path / "b").exists()


def test_regression_methods_say_the_bundle_is_not_written_yet(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--data", "gas-concentration", "--method", "cstc", "--out",
                 str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot write a regression bundle yet" in err and "\n" not in err
    assert not (tmp_path / "b").exists()
