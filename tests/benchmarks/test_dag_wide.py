"""benchmarks.dag_wide's pairing of the DAG with ADAPT-GBRT, seed by seed, and its --param."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from benchmarks.dag_wide import _extra, summary


def run(method: str, seed: int, reduction: float, held: bool, tag: str = "") -> dict[str, Any]:
    return {"method": method, "seed": seed, "tag": tag, "point": f"{method}-p",
            "certified": held,
            "test": {"cost_reduction": reduction, "accuracy": 0.98, "hpc_accuracy": 0.985,
                     "held": held}}


def test_summary_meets_only_held_seeds_at_nine_tenths_of_adapt() -> None:
    runs = [run("dag", 0, 0.55, True, "blocks"), run("adapt-gbrt", 0, 0.6, True),
            run("dag", 1, 0.53, True, "blocks"), run("adapt-gbrt", 1, 0.6, True),
            run("dag", 2, 0.70, False, "blocks"), run("adapt-gbrt", 2, 0.6, True),
            run("dag", 0, 0.10, True)]  # another variant: not this tag's
    out = summary(runs, "blocks")
    assert [r["met"] for r in out["seeds"]] == [True, False, False]
    assert out["met_seeds"] == 1 and out["dag_mean_cost_reduction"] == pytest.approx(0.5933, 1e-3)
    assert out["adapt_gbrt_mean_cost_reduction"] == pytest.approx(0.6)
    assert summary(runs, "")["seeds"][0]["dag_cost_reduction"] == 0.1


def test_params_are_method_key_value() -> None:
    parser = argparse.ArgumentParser()
    assert _extra(["dag:lattice=blocks", "dag:reduction=lr"], parser) == {
        "dag": {"lattice": "blocks", "reduction": "lr"}}
    with pytest.raises(SystemExit):
        _extra(["lattice=blocks"], parser)
