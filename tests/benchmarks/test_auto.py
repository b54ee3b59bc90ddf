"""``benchmarks.auto``: digits-binary goes through the CSV path, and the summary counts what
each seed's default point did."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.auto import _bits, _unbits, load, pick_by_rules, rule_table, summary


def test_digits_binary_is_the_csv_path_with_a_seeded_60_20_20_split(tmp_path: Path) -> None:
    d = load("digits-binary", 3, tmp_path)
    n = len(d.y_train) + len(d.y_val) + len(d.y_test)
    assert n == 1797 and d.n_features == 64 and len(d.sensors) == 64
    assert abs(len(d.y_val) - 0.2 * n) <= 2 and abs(len(d.y_test) - 0.2 * n) <= 2
    assert d.classes == ("ge5", "lt5") and "seed 3" in d.description
    assert "uniform cost" in d.description
    other = load("digits-binary", 4, tmp_path)
    assert (d.y_val != other.y_val).any() or (d.X_val != other.X_val).any()


def test_summary_counts_certified_and_held_per_method() -> None:
    def run(seed: int, reduction: float, certified: bool, held: bool) -> dict:  # type: ignore[type-arg]
        point = {"certified": certified, "test": {"cost_reduction": reduction, "held": held}}
        return {"dataset": "x", "seed": seed, "methods": {"auto": point}}

    got = summary([run(0, 0.5, True, True), run(1, 0.3, False, True)])["x"]["auto"]
    assert got["seeds"] == [0, 1] and got["certified"] == 1 and got["held"] == 2
    assert got["mean_cost_reduction"] == 0.4


def test_breast_cancer_is_the_csv_path_with_at_most_150_validation_rows(tmp_path: Path) -> None:
    d = load("breast-cancer", 0, tmp_path)
    n = len(d.y_train) + len(d.y_val) + len(d.y_test)
    assert n == 569 and d.n_features == 30 and len(d.y_val) <= 150
    assert set(d.classes) == {"benign", "malignant"} and "uniform cost" in d.description


def test_the_rules_differ_as_designed_on_a_lucky_cheap_point() -> None:
    """400 validation rows, HPC right on all but 8. The expensive point equals the HPC; the
    middle one is 3% worse (fails); the cheap one is lucky (right on 4 rows the HPC missed).
    One by one the lucky point is certified; in sequence the middle one stops the run at
    the expensive point; the split tests only what one half chooses, on the other half."""
    hpc = np.ones(400, dtype=bool)
    hpc[:8] = False
    equal, worse, lucky = hpc.copy(), hpc.copy(), hpc.copy()
    worse[100:112] = False
    lucky[:4] = True
    got = pick_by_rules([1.0, 2.0, 3.0], [lucky, worse, equal], hpc, seed=0)
    assert got["per_point"] == 0 and got["fixed_sequence"] == 2
    assert got["split"] in (0, None)  # half A's front is the cheap point alone


def test_rule_table_reads_the_recorded_front_back(tmp_path: Path) -> None:
    hpc = np.ones(37, dtype=bool)
    worse = hpc.copy()
    worse[:9] = False
    front = {"n_rows": 37, "hpc_right": _bits(hpc), "points": [
        {"name": "a", "validation_cost": 1.0, "validation_right": _bits(worse), "test": {}},
        {"name": "b", "validation_cost": 2.0, "validation_right": _bits(hpc), "test": {}}]}
    assert (_unbits(_bits(worse), 37) == worse).all()
    got = rule_table(front, 0)
    assert got["per_point"]["certified"] is False  # 37 rows: even the HPC's twin fails
    assert got["fixed_sequence"] == {"point": None, "certified": False, "test": None}


def test_summary_gathers_each_rule_of_auto() -> None:
    rules = {"fixed_sequence": {"certified": True, "test": {"cost_reduction": 0.6,
                                                            "held": True}},
             "per_point": {"certified": False, "test": None}}
    run = {"dataset": "x", "seed": 0, "methods": {"auto": {
        "certified": True, "test": {"cost_reduction": 0.6, "held": True}, "rules": rules}}}
    got = summary([run])["x"]
    assert got["auto/fixed_sequence"]["certified"] == 1 and got["auto/per_point"]["held"] == 0
    assert got["auto/per_point"]["mean_cost_reduction"] is None
