"""``benchmarks.auto``: digits-binary goes through the CSV path, and the summary counts what
each seed's default point did."""

from __future__ import annotations

from pathlib import Path

from benchmarks.auto import load, summary


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
