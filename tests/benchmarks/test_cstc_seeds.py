"""``benchmarks.cstc_seeds``: what each seed's ``benchmarks.cstc`` run chose, over seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.cstc_seeds import markdown, summarise


def _point(val_cost: float, test_acc: float, test_cost: float) -> dict[str, object]:
    return {"val": {"accuracy": 0.97, "cost": val_cost},
            "test": {"accuracy": test_acc, "cost": test_cost, "escalation_rate": 0.1}}


def _run(seed: int, chosen: dict[str, object] | None, at_gm: float) -> dict[str, object]:
    return {"seed": seed, "hpc_test_accuracy": 0.98, "methods": {
        "cstc": {"cpu_seconds": 5.0 + seed, "best_within_1pct": chosen},
        "greedy-miser": {"cpu_seconds": 9.0, "best_within_1pct": None}},
        "vs_greedy_miser": {"greedy_miser": _point(11.0, 0.95, 11.0),
                            "cstc": _point(at_gm, 0.96, at_gm + 0.1)}}


def test_seeds_are_summarised_as_they_were_chosen(tmp_path: Path) -> None:
    runs = [_run(0, _point(9.0, 0.97, 9.5), 10.0), _run(1, _point(9.0, 0.96, 10.5), 12.0),
            _run(2, None, 10.5)]
    dirs = []
    for r in runs:
        d = tmp_path / f"s{r['seed']}"
        d.mkdir()
        (d / "cstc-thyroid.json").write_text(json.dumps(r))
        dirs.append(d)
    cstc = summarise(dirs)["thyroid"]["methods"]["cstc"]
    assert cstc["seeds"] == [0, 1, 2] and cstc["within_1pct_seeds"] == 2
    assert cstc["test_cost"]["mean"] == pytest.approx(10.0)
    assert cstc["test_cost"]["sd"] == pytest.approx(0.7071, abs=1e-4)
    assert cstc["cheaper_than_gm_on_validation"] == 2  # 10.0 and 10.5 below 11.0, not 12.0
    assert cstc["cpu_seconds"] == [5.0, 7.0]
    table = markdown(summarise(dirs))
    assert "| cstc | 2 of 3 |" in table and "(2 of 3)" in table
