"""``benchmarks.adapt --param METHOD:KEY=VALUE``: per-method options, checked before any fit."""

from __future__ import annotations

import argparse
from typing import Any

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


def test_the_certified_row_is_the_paired_rules_cheapest_point() -> None:
    from benchmarks.adapt import _certified, _most_accurate

    def point(name: str, acc: float, cost: float, bound: float | None) -> dict[str, object]:
        return {"name": name, "validation": {"accuracy": acc, "cost": cost,
                                             "escalation_rate": 0.0, "paired_lower_bound": bound},
                "test": {"accuracy": acc - 0.01, "cost": cost, "escalation_rate": 0.0}}

    points = [point("cheap", 0.90, 2.0, -0.05), point("mid", 0.95, 5.0, -0.008),
              point("dear", 0.97, 9.0, 0.001), point("unknown", 0.99, 1.0, None)]
    got = _certified(points, hpc_cost=10.0)
    assert got is not None and got["name"] == "mid" and got["cost_reduction"] == 0.5
    assert _certified(points[:1], hpc_cost=10.0) is None
    best = _most_accurate(points)
    assert best is not None and best["name"] == "unknown"


def test_the_cegb_row_takes_the_cegb_methods_options() -> None:
    assert _params(["lightgbm-cegb:n_rounds=50"], _parser()) == {
        "lightgbm-cegb": {"n_rounds": "50"}}
    with pytest.raises(SystemExit):
        _params(["lightgbm-cegb:n_rounds=0"], _parser())


def test_certified_within_1pct_is_the_cheapest_point_with_a_paired_bound_within_1pct() -> None:
    from benchmarks.adapt import _certified

    def point(name: str, cost: float, bound: float) -> dict[str, Any]:
        return {"name": name, "validation": {"accuracy": 0.97, "cost": cost,
                                             "paired_lower_bound": bound},
                "test": {"accuracy": 0.96, "cost": cost + 1, "escalation_rate": 0.0}}

    points = [point("a", 3.0, -0.02), point("b", 5.0, -0.009), point("c", 4.0, -0.0101)]
    best = _certified(points, 10.0)
    assert best is not None and best["name"] == "b"
    assert best["cost_reduction"] == pytest.approx(1 - 6.0 / 10.0)
    assert _certified(points[:1], 10.0) is None
