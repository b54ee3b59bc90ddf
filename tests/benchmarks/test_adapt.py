"""``benchmarks.adapt --param METHOD:KEY=VALUE``: per-method options, checked before any fit."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.adapt import _params


def _parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog="benchmarks.adapt", exit_on_error=False)


def test_options_are_grouped_by_method() -> None:
    got = _params(["adapt-gbrt:warm_start=false", "adapt-gbrt:margin_weights=0,1",
                   "adapt-gbrt:warm_start=true"], _parser())
    assert got == {"adapt-gbrt": {"warm_start": "true", "margin_weights": "0,1"}}


@pytest.mark.parametrize("item", ["warm_start=false", "adapt-gbrt:warm_start",
                                  "nope:warm_start=false", "adapt-gbrt:no_such_key=1",
                                  "adapt-gbrt:warm_start=perhaps", "l1:lambdas=0.1"])
def test_a_bad_option_is_refused(item: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _params([item], _parser())
    assert "--param" in capsys.readouterr().err
