"""``benchmarks.cart_trees``: the per-tree timing grows real trees (restricted and not)."""

from __future__ import annotations

import pytest

from benchmarks.cart_trees import per_tree_ms


@pytest.mark.parametrize("allowed", [None, 4])
def test_per_tree_ms_times_real_trees(allowed: int | None) -> None:
    ms = per_tree_ms(n_rows=400, n_features=8, allowed=allowed, trees=2, seed=0)
    assert ms > 0.0
