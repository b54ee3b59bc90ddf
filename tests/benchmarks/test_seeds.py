"""``benchmarks.seeds``: the chosen point per seed, by the lower-bound rule and the old one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def _dag_point(family: str, val: float, cost: float, test: float) -> dict[str, object]:
    return {"family": family, "params": {}, "val": {"accuracy": val, "cost": cost},
            "test": {"accuracy": test, "cost": cost, "escalation_rate": 0.0}}


def test_dag_vs_static_is_rechosen_by_the_lower_bound(tmp_path: Path) -> None:
    # all sensors 0.97 on 2000 validation rows: target 0.96. "cheap" reaches it by the point
    # estimate only (the stored at_1pct of an old-rule file would name it); "sure" by the bound
    for seed, scale in ((0, 1.0), (1, 2.0)):
        pts = [_dag_point("dag", 0.962, 2.0 * scale, 0.95),
               _dag_point("dag-no-escalation", 0.985, 5.0 * scale, 0.98),
               _dag_point("static", 0.99, 10.0 * scale, 0.985),
               _dag_point("static", 0.9605, 4.0 * scale, 0.96),
               _dag_point("all-sensors", 0.97, 16.0 * scale, 0.97)]
        report = {"seed": seed, "datasets": {"toy": {
            "hpc_val_accuracy": 0.99, "hpc_accuracy": 0.99, "always_cloud_cost": 16.0 * scale,
            "validation_rows": 2000, "all_sensors_val_accuracy": 0.97,
            "all_sensors_accuracy": 0.97, "at_1pct": {"dag": {"test_cost": 2.0}},
            "points": pts}}}
        (tmp_path / f"dag-s{seed}.json").write_text(json.dumps(report))
    table = summarise(sorted(tmp_path.glob("dag-s*.json")))["toy"]["dag-vs-static"]
    seed0 = table["per_seed"]["0"]
    assert seed0["dag"]["test_cost"] == 5.0 and seed0["static"]["test_cost"] == 10.0
    assert seed0["ratio"] == 0.5 and table["per_seed"]["1"]["dag"]["test_cost"] == 10.0
    assert table["dag_test_cost"] == {"seeds": 2, "mean": 7.5, "sd": pytest.approx(2.5 * 2 ** 0.5)}
    assert table["ratio"]["mean"] == 0.5 and table["ratio"]["sd"] == 0.0
