"""``benchmarks.adapt_gbrt_fit``: real default-grid fits, timed, and a digest of their trees."""

from __future__ import annotations

import pytest

from benchmarks.adapt_gbrt_fit import fit_seconds

SMALL = {"n_rounds": 1, "refine_rounds": 1, "n_trees": 2, "max_depth": 2}


@pytest.mark.slow  # fits the heart HPC, then five small sweeps
def test_fit_seconds_times_each_setting_and_digests_the_trees() -> None:
    out = fit_seconds("heart", fits=2, repeats=2, overrides=SMALL)
    assert [len(f["all"]) for f in out["fit_cpu_s"]] == [2, 2]
    assert all(f["median"] > 0 for f in out["fit_cpu_s"])
    assert out["fit_cpu_s"][0]["p_full"] == 0.1  # the default grid's first setting
    again = fit_seconds("heart", fits=2, repeats=1, overrides=SMALL)
    assert again["trees_sha256"] == out["trees_sha256"]  # the same trees: one digest
    more = fit_seconds("heart", fits=2, repeats=1, overrides={**SMALL, "n_trees": 3})
    assert more["trees_sha256"] != out["trees_sha256"]
