"""The certify hold-out (issue 36, ``data.splits.certify_rows`` / ``hold_out_certify``): a
seeded stratified share of the validation rows that no fit and no choice of the sweep sees,
on which the default point is certified; the same labels, share and seed give the same rows."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.trainer.data.dataset_core import DatasetError
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.data.splits import (
    DEFAULT_CERTIFY_FRACTION,
    certify_rows,
    hold_out_certify,
)


def test_certify_rows_are_an_exact_stratified_seeded_share_of_validation() -> None:
    y = np.array([0] * 70 + [1] * 30, dtype=np.int64)
    select, certify = certify_rows(y, 0.5, 3)
    assert len(certify) == 50 and len(select) == 50
    assert sorted([*select, *certify]) == list(range(100))  # a partition
    assert np.sum(y[certify] == 1) == 15  # the classes' shares kept
    again = certify_rows(y, 0.5, 3)
    assert np.array_equal(again[0], select) and np.array_equal(again[1], certify)
    other = certify_rows(y, 0.5, 4)[1]
    assert not np.array_equal(other, certify)
    assert len(certify_rows(y, 0.3, 3)[1]) == 30
    assert DEFAULT_CERTIFY_FRACTION == 0.5


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.2, float("nan"), 0.001, 0.999])
def test_a_share_that_leaves_a_side_empty_is_refused_in_one_line(fraction: float) -> None:
    y = np.array([0, 1] * 20, dtype=np.int64)
    with pytest.raises(DatasetError, match="--certify-fraction") as err:
        certify_rows(y, fraction, 0)
    assert "\n" not in str(err.value) and "--val-fraction" in str(err.value)


def test_hold_out_cuts_validation_and_leaves_train_and_test_alone() -> None:
    heart = load_dataset("heart")
    rest, (X_c, y_c) = hold_out_certify(heart, 0.5, 0)
    select, certify = certify_rows(heart.y_val, 0.5, 0)
    assert np.array_equal(rest.X_val, heart.X_val[select])
    assert np.array_equal(rest.y_val, heart.y_val[select])
    assert np.array_equal(X_c, heart.X_val[certify]) and np.array_equal(y_c, heart.y_val[certify])
    assert np.array_equal(rest.X_train, heart.X_train) and np.array_equal(rest.X_test, heart.X_test)
    assert len(rest.y_val) + len(y_c) == len(heart.y_val)
    assert "held out to certify" in rest.description
