"""The regression rule: a paired t-bound on squared-error differences, certifying a point within
tolerance of the HPC and refusing one clearly worse (through ``certified_near``, unchanged)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adaptedge.protocol.error_rule import (
    PairedErrors,
    default_tolerance,
    paired_error_bound,
    t_quantile,
)
from adaptedge.protocol.operating_points import certified_near


class _Point:
    def __init__(self, accuracy: float, cost: float) -> None:
        self.accuracy = accuracy
        self.cost = cost


@pytest.mark.parametrize(("df", "expected"), [(1, 12.7062), (5, 2.5706), (10, 2.2281),
                                              (30, 2.0423), (299, 1.9679), (10**6, 1.9600)])
def test_t_quantile_matches_tables(df: int, expected: float) -> None:
    assert t_quantile(df) == pytest.approx(expected, abs=2e-3)


def _rows(seed: int, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    hpc = y + rng.normal(scale=0.5, size=n)
    return y, hpc


@pytest.mark.parametrize("seed", range(5))
def test_certifies_a_point_within_tolerance(seed: int) -> None:
    y, hpc = _rows(seed)
    point = hpc + np.random.default_rng(100 + seed).normal(scale=0.01, size=y.size)
    e = PairedErrors.of(y, point, hpc)
    tolerance = default_tolerance(e.hpc_mse)
    assert e.lower_bound >= -tolerance
    points = [_Point(-e.hpc_mse, 10.0), _Point(-e.point_mse, 2.0)]
    assert certified_near(points, [0.0, e.lower_bound], tolerance) == 1


@pytest.mark.parametrize("seed", range(5))
def test_refuses_a_point_clearly_worse(seed: int) -> None:
    y, hpc = _rows(seed)
    point = y + np.random.default_rng(200 + seed).normal(scale=0.7, size=y.size)  # MSE ~2x
    e = PairedErrors.of(y, point, hpc)
    tolerance = default_tolerance(e.hpc_mse)
    assert e.lower_bound < -tolerance
    points = [_Point(-e.hpc_mse, 10.0), _Point(-e.point_mse, 2.0)]
    assert certified_near(points, [0.0, e.lower_bound], tolerance) == 0  # the HPC-level point


def test_identical_predictions_bound_is_zero() -> None:
    y, hpc = _rows(0, n=50)
    e = PairedErrors.of(y, hpc, hpc)
    assert e.difference == 0.0 and e.lower_bound == 0.0
    assert e.point_mae == pytest.approx(float(np.abs(hpc - y).mean()))


def test_bound_is_the_t_formula() -> None:
    y = np.array([0.0, 1.0, 2.0, 3.0])
    point = np.array([0.5, 1.0, 2.0, 2.0])
    hpc = np.array([0.0, 1.5, 2.0, 3.0])
    d = (hpc - y) ** 2 - (point - y) ** 2
    e = PairedErrors.of(y, point, hpc)
    expected = d.mean() - 3.182446305 * d.std(ddof=1) / 2.0
    assert e.lower_bound == pytest.approx(expected)


def test_too_few_rows_never_certify() -> None:
    assert paired_error_bound(1.0, 0.0, 1) == -math.inf
    assert PairedErrors.of([], [], []).lower_bound == -math.inf


def test_refuses_bad_inputs() -> None:
    with pytest.raises(ValueError, match="same rows"):
        PairedErrors.of([1.0, 2.0], [1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        PairedErrors.of([1.0, 2.0], [1.0, math.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="HPC's validation MSE"):
        default_tolerance(math.nan)
    assert default_tolerance(2.0) == pytest.approx(0.1)
