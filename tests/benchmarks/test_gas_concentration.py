"""``benchmarks.gas_concentration --quick`` on one seed: every method's points carry validation
and test MSE/MAE (ppmv) and cost, always-HPC costs 16 with bound 0, and the chosen points
obey the rule (certified ones are the cheapest certified)."""

from __future__ import annotations

import pytest

from benchmarks.gas_concentration import run_seed


@pytest.mark.slow
def test_quick_seed_reports_every_method_in_ppmv() -> None:
    report = run_seed(0, quick=True)
    assert report["unit"] == "ppmv" and report["tolerance_ppmv2"] > 0
    methods = {p["method"] for p in report["points"]}
    assert methods == {"always-hpc", "static-subset", "greedy-miser", "cstc", "confidence"}
    hpc = report["hpc"]
    assert hpc["val"]["cost"] == 16.0 and hpc["val"]["paired_lower_bound"] == 0.0
    for p in report["points"]:
        for split in ("val", "test"):
            assert p[split]["mse"] >= p[split]["mae"] ** 2 - 1e-6  # Jensen: MSE >= MAE^2
            assert 0.0 <= p[split]["cost"] <= 16.0
    tol = report["tolerance_ppmv2"]
    chosen = report["chosen"]
    certified = [p for p in report["points"] if p["val"]["paired_lower_bound"] >= -tol]
    assert chosen["certified"] == bool(certified)
    if certified:
        assert chosen["val"]["cost"] == min(p["val"]["cost"] for p in certified)
