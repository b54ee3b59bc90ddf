"""``benchmarks.cstc_synthetic --task regression`` (§6.1 as a regression): the point chosen on
validation meets MSE <= 0.05 at cost <= 12.5 with the paper's tree; a lambda too large to
afford the expensive sensors fails the path check (the check can fail)."""

from __future__ import annotations

import pytest

from benchmarks.cstc_synthetic_regression import paths_read_sign_sign_expensive, run_seed


@pytest.mark.slow
def test_seed_0_meets_the_acceptance_and_prints_the_tree() -> None:
    report = run_seed(0, (1.0, 0.1))
    assert report["accepted"] and report["chosen"]["lambda"] == 0.1
    assert report["chosen"]["test"]["mse"] <= 0.05 and report["chosen"]["test"]["cost"] <= 12.5
    assert len(report["tree"]) == 7 and report["tree"][0].startswith("node 0: adds ['sign_z']")
    assert report["hpc"]["cost"] == 42.0 and len(report["curve"]) == 2
    cheap = report["curve"][0]
    assert cheap["test"]["cost"] < 12.0 and cheap["test"]["mse"] > 0.05


def test_path_check_refuses_a_tree_without_expensive_leaves() -> None:
    from adaptedge.trainer.data.synthetic_regression import regression_quadrants
    from adaptedge.trainer.methods.cstc.regressor import CSTCRegressor

    d = regression_quadrants(n=800, seed=0)
    model = CSTCRegressor(groups=[(i,) for i in range(6)], costs=[1, 1, 10, 10, 10, 10],
                          lam=3.0).fit(d.X_train, d.targets("train"), d.X_val,
                                       d.targets("validation"))
    assert not paths_read_sign_sign_expensive(model)
