from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.edge.device import ReplayRows
from adaptedge.edge.device.rows import RowSensors
from adaptedge.edge.errors import DeviceError
from adaptedge.protocol import Manifest


def test_rows_need_one_label_and_one_size_each() -> None:
    X = np.zeros((3, 2), np.float32)
    with pytest.raises(DeviceError, match="one truth label"):
        ReplayRows(X, ["a", "b"], ("f0", "f1"))
    with pytest.raises(DeviceError, match="2-D"):
        ReplayRows(np.zeros(3, np.float32), ["a", "b", "c"], ("f0",))
    with pytest.raises(DeviceError, match="one size"):
        ReplayRows(X, ["a", "b", "c"], ("f0", "f1"), sizes=np.ones(2))
    rows = ReplayRows(X, ["a", "b", "c"], ("f0", "f1"), sizes=np.array([1.0, 2.0, 3.0]))
    assert len(rows) == 3 and rows.size(1) == 2.0
    assert ReplayRows(X, ["a", "b", "c"], ("f0", "f1")).size(1) is None


def test_rows_of_other_features_are_refused(toy_bundle: tuple[Path, Manifest]) -> None:
    _, manifest = toy_bundle
    names = tuple(manifest.feature_names)
    X = np.zeros((1, len(names)), np.float32)
    ReplayRows(X, ["x"], names).check(manifest)
    with pytest.raises(DeviceError, match=r"do not match dataset 'other\.csv'"):
        ReplayRows(X, ["x"], (*names[:-1], "elsewhere"), source="other.csv").check(manifest)


def test_each_sensor_reads_its_columns_of_the_row_shown(
        toy_bundle: tuple[Path, Manifest]) -> None:
    _, manifest = toy_bundle
    sensors = RowSensors(manifest)
    assert set(sensors.readers) == {s.name for s in manifest.sensors}
    for row in (np.arange(len(manifest.feature_names), dtype=np.float32) + 1.0,
                np.full(len(manifest.feature_names), -2.0, np.float32)):
        sensors.show(row)
        for spec in manifest.sensors:
            reader = sensors.readers[spec.name]
            assert callable(reader)
            np.testing.assert_array_equal(reader(), row[list(spec.features)])
