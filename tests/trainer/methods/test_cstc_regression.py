"""CSTC on squared loss (Xu et al. 2014, §6.1): on the paper's synthetic regression the tree
splits on one sign, then the other, then reads one expensive feature per leaf, with near-zero
test MSE at cost 12; standardisation is folded back into the data's units."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from adaptedge.trainer.data.dataset_core import Dataset
from adaptedge.trainer.data.synthetic_regression import regression_quadrants
from adaptedge.trainer.methods.cstc.regressor import CSTCRegressor

COSTS = [1.0, 1.0, 10.0, 10.0, 10.0, 10.0]


def _fit(seed: int, n: int = 1200, lam: float = 0.1) -> tuple[CSTCRegressor, Dataset]:
    d = regression_quadrants(n=n, seed=seed)
    model = CSTCRegressor(groups=[(i,) for i in range(6)], costs=COSTS, lam=lam,
                          random_state=seed)
    model.fit(d.X_train, d.targets("train"), d.X_val, d.targets("validation"))
    return model, d


@pytest.mark.parametrize("seed", [0, 1])
def test_section_6_1_tree_reads_a_sign_then_the_other_then_one_expensive(seed: int) -> None:
    model, d = _fit(seed)
    X, y = d.X_test, d.targets("test")
    assert float(np.mean((model.predict(X) - y) ** 2)) <= 0.05
    assert float(model.row_costs(X).mean()) <= 12.5
    shape = model.model_.shape
    for leaf in shape.terminals():
        path = shape.path(leaf)
        added: list[set[int]] = []
        seen: set[int] = set()
        for k in path:
            new = set(model.model_.groups[k]) - seen
            added.append(new)
            seen |= new
        assert len(path) == 3, f"leaf {leaf}: path {path}"
        assert added[0] == {1} and added[1] == {0}  # sign_z first (it carries the mean), sign_x
        assert len(added[2]) == 1 and added[2] <= {2, 3, 4, 5}


def test_predictions_are_in_the_datas_units() -> None:
    model, d = _fit(0, n=800)
    shifted = CSTCRegressor(groups=[(i,) for i in range(6)], costs=COSTS, lam=0.1)
    offset = 1000.0
    shifted.fit(d.X_train, d.targets("train") + offset,
                d.X_val, d.targets("validation") + offset)
    X = d.X_test
    np.testing.assert_allclose(shifted.predict(X) - offset, model.predict(X), atol=0.05)


def test_refuses_non_finite_targets_and_unfitted_use() -> None:
    X = np.zeros((10, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="finite"):
        CSTCRegressor().fit(X, np.full(10, np.nan))
    with pytest.raises(NotFittedError):
        CSTCRegressor().predict(X)
