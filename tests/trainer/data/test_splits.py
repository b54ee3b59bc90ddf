"""Splits that respect time (issue 20 item 6): ``gas-time`` by batch, ``wall-robot-time`` by
position on the robot's trajectory; the random-split names are unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.trainer.data.data_files import read_rows
from adaptedge.trainer.data.dataset_core import data_dir
from adaptedge.trainer.data.datasets import load_dataset

GAS_BATCH_ROWS = {1: 445, 2: 1244, 3: 1586, 4: 161, 5: 197, 6: 2300, 8: 294, 9: 470}


def _file_rows(path: str) -> list[list[str]]:
    return read_rows(data_dir() / path, ",")


@pytest.mark.slow
def test_gas_time_trains_on_early_batches_and_tests_on_late_ones() -> None:
    timed = load_dataset("gas-time")
    assert timed.name == "gas-time" and "batch" in timed.description
    assert len(timed.y_train) == sum(GAS_BATCH_ROWS[b] for b in (1, 2, 3, 4, 5))
    assert len(timed.y_val) == GAS_BATCH_ROWS[6]
    assert len(timed.y_test) == GAS_BATCH_ROWS[8] + GAS_BATCH_ROWS[9]
    # batch 9's last row is the test set's last row; batch 1's first row trains
    last = _file_rows("gas_sensor_drift/batch9.dat.gz")[-1]
    first = _file_rows("gas_sensor_drift/batch1.dat.gz")[0]
    assert float(last[2]) == timed.X_test[-1, 0] and float(first[2]) == timed.X_train[0, 0]
    # the seed does not move a time-ordered split; it does move the random one
    assert np.array_equal(load_dataset("gas-time", seed=7).X_test, timed.X_test)
    assert not np.array_equal(load_dataset("gas", seed=7).y_test, load_dataset("gas").y_test)


def test_wall_robot_time_is_contiguous_blocks_in_file_order() -> None:
    timed = load_dataset("wall-robot-time", seed=3)
    body = _file_rows("wall_robot_navigation/sensor_readings_24.data.gz")[1:]
    X_file = np.array([[float(v) for v in r[:-1]] for r in body], dtype=np.float32)
    X_all = np.concatenate([timed.X_train, timed.X_val, timed.X_test])
    assert np.array_equal(X_all, X_file)
    assert len(timed.y_val) == len(timed.y_test) == round(0.2 * len(body))
    mixed = load_dataset("wall-robot", seed=3)
    assert not np.array_equal(np.concatenate([mixed.X_train, mixed.X_val, mixed.X_test]), X_file)


def test_val_fraction_redraws_validation_from_training_rows_only() -> None:
    """``train --val-fraction``: validation holds that share of all rows, drawn from the
    training rows; the test rows stay exactly as they were; the same seed, the same split."""
    from adaptedge.trainer.data.dataset_core import DatasetError
    from adaptedge.trainer.data.splits import validation_fraction, with_val_fraction

    d = load_dataset("heart", seed=3)
    n_all = len(d.y_train) + len(d.y_val) + len(d.y_test)
    v = with_val_fraction(d, 0.4, 3)
    assert len(v.y_val) == round(0.4 * n_all) > len(d.y_val)
    assert validation_fraction(v) == round(len(v.y_val) / n_all, 6)
    assert np.array_equal(v.X_test, d.X_test) and np.array_equal(v.y_test, d.y_test)
    pool = np.concatenate([d.X_train, d.X_val])
    got = np.concatenate([v.X_train, v.X_val])
    assert sorted(map(tuple, pool.tolist())) == sorted(map(tuple, got.tolist()))
    again = with_val_fraction(d, 0.4, 3)
    assert np.array_equal(again.X_val, v.X_val)
    share = np.mean(v.y_val) - np.mean(np.concatenate([d.y_train, d.y_val]))
    assert abs(share) < 0.02  # stratified
    for bad in (0.0, 0.85, float("nan")):
        try:
            with_val_fraction(d, bad, 3)
        except DatasetError as exc:
            assert "--val-fraction" in str(exc)
        else:
            raise AssertionError(f"{bad} accepted")


def test_val_fraction_recorded_share_redraws_the_same_rows() -> None:
    """``adaptedge evaluate`` re-draws a ``--val-fraction`` bundle's split from the share the
    recipe records: it must give the very same rows."""
    from adaptedge.trainer.data.splits import split_recipe, validation_fraction, with_val_fraction

    d = load_dataset("heart", seed=1)
    for fraction in (0.3, 0.37, 0.45):
        v = with_val_fraction(d, fraction, 1)
        again = with_val_fraction(d, validation_fraction(v), 1)
        assert split_recipe(again, 1).digest == split_recipe(v, 1).digest
