"""``benchmarks.seeds``: the chosen point per seed, by the lower-bound rule and the old one."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.seeds import summarise


def _point(name: str, val: float, test: float, cost: float) -> dict[str, object]:
    return {"name": name, "validation": {"accuracy": val, "cost": cost},
            "test": {"accuracy": test, "cost": cost}}


def test_the_lower_bound_rule_asks_for_a_margin(tmp_path: Path) -> None:
    # 2000 validation rows, HPC 0.975 on validation and 0.975 on test: "cheap" reaches the
    # point estimate bar (0.965) but not the lower bound one; it fails on test, "sure" holds
    report = {"seed": 4, "datasets": {"toy": {
        "hpc": {"validation_accuracy": 0.975, "test_accuracy": 0.975, "cost": 10.0,
                "validation_rows": 2000},
        "methods": {"m": {"points": [_point("cheap", 0.966, 0.96, 2.0),
                                     _point("sure", 0.99, 0.98, 6.0)]}}}}}
    path = tmp_path / "adapt.json"
    path.write_text(json.dumps(report))
    entry = summarise([path])["toy"]["m"]
    seed = entry["per_seed"]["4"]
    assert seed["point_estimate_rule"]["test_cost"] == 2.0
    assert seed["point_estimate_rule"]["holds"] is False
    assert seed["lower_bound_rule"]["test_cost"] == 6.0
    assert seed["lower_bound_rule"]["holds"] is True
    assert seed["lower_bound_rule"]["cost_reduction"] == 0.4
    assert entry["lower_bound_rule"]["holds"] == 1 and entry["point_estimate_rule"]["holds"] == 0
