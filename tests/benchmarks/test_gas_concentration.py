"""``benchmarks.gas_concentration --quick`` on one seed: every method's points carry validation
and test MSE/MAE (ppmv) and cost, always-HPC costs 16 with bounds 0, and the chosen points obey
the rule (the validation frontier on MAE, then fixed-sequence testing of the MAE bounds)."""

from __future__ import annotations

import pytest

from adaptedge.protocol.operating_points import fixed_sequence
from benchmarks.gas_concentration import _frontier, _Scored, run_seed


@pytest.mark.slow
def test_quick_seed_reports_every_method_in_ppmv() -> None:
    report = run_seed(0, quick=True)
    assert report["unit"] == "ppmv" and report["rule_metric"] == "mae"
    assert report["tolerance_ppmv"] == pytest.approx(0.05 * report["hpc"]["val"]["mae"])
    methods = {p["method"] for p in report["points"]}
    assert methods == {"always-hpc", "static-subset", "greedy-miser", "cstc", "confidence"}
    hpc = report["hpc"]
    assert hpc["val"]["cost"] == 16.0 and hpc["val"]["paired_lower_bound"] == 0.0
    assert hpc["val"]["mse_paired_lower_bound"] == 0.0
    for p in report["points"]:
        for split in ("val", "test"):
            assert p[split]["mse"] >= p[split]["mae"] ** 2 - 1e-6  # Jensen: MSE >= MAE^2
            assert 0.0 <= p[split]["cost"] <= 16.0
    tol = report["tolerance_ppmv"]
    front = _frontier(report["points"])
    maes = [p["val"]["mae"] for p in front]
    assert maes == sorted(maes, reverse=True) and len(set(maes)) == len(maes)
    bounds = [p["val"]["paired_lower_bound"] for p in front]
    passed = fixed_sequence([_Scored(p) for p in front], bounds, tol)
    chosen = report["chosen"]
    assert chosen["certified"] == bool(passed)
    if passed:
        assert chosen["val"]["cost"] == min(front[i]["val"]["cost"] for i in passed)
        assert chosen["val"]["paired_lower_bound"] >= -tol
    check = report["rule_check"]
    for metric in ("mae", "mse"):
        assert 0 <= check[metric]["worse_on_test"] <= check[metric]["certified"]
