"""The regression rule: a paired t-bound on ABSOLUTE-error differences (MAE), certifying a point
within tolerance of the HPC and refusing one clearly worse (through ``certified_near``,
unchanged), also when the errors are heavy-tailed; the squared-error bound is still computed
for reports."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adaptedge.protocol.error_rule import (
    RULE_METRIC,
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


def _rows(seed: int, n: int = 400, heavy: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Targets and an HPC's values; ``heavy``: Student-t (2.5 df) targets and HPC errors, as
    gas concentrations' (a few rows carry most of the squared error)."""
    rng = np.random.default_rng(seed)
    if heavy:
        y = 5.0 * rng.standard_t(2.5, size=n)
        return y, y + rng.standard_t(2.5, size=n)
    y = rng.normal(size=n)
    return y, y + rng.normal(scale=0.5, size=n)


def _choose(e: PairedErrors) -> int | None:
    points = [_Point(-e.hpc_mse, 10.0), _Point(-e.point_mse, 2.0)]
    return certified_near(points, [0.0, e.lower_bound], default_tolerance(e.hpc_mae))


@pytest.mark.parametrize("heavy", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_certifies_a_point_within_tolerance(seed: int, heavy: bool) -> None:
    y, hpc = _rows(seed, n=1340, heavy=heavy)
    point = hpc + np.random.default_rng(100 + seed).normal(scale=0.01, size=y.size)
    e = PairedErrors.of(y, point, hpc)
    assert e.lower_bound >= -default_tolerance(e.hpc_mae)
    assert _choose(e) == 1  # the cheap point


@pytest.mark.parametrize("heavy", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_refuses_a_point_clearly_worse(seed: int, heavy: bool) -> None:
    y, hpc = _rows(seed, n=1340, heavy=heavy)
    rng = np.random.default_rng(200 + seed)
    point = hpc + (rng.standard_t(2.5, size=y.size) if heavy
                   else rng.normal(scale=0.5, size=y.size))  # MAE ~1.3-1.4x the HPC's
    e = PairedErrors.of(y, point, hpc)
    assert e.point_mae > 1.2 * e.hpc_mae
    assert e.lower_bound < -default_tolerance(e.hpc_mae)
    assert _choose(e) == 0  # the HPC-level point


def test_identical_predictions_bound_is_zero() -> None:
    y, hpc = _rows(0, n=50)
    e = PairedErrors.of(y, hpc, hpc)
    assert e.difference == 0.0 and e.lower_bound == 0.0 and e.mse_lower_bound == 0.0
    assert e.point_mae == pytest.approx(float(np.abs(hpc - y).mean())) == e.hpc_mae


def test_bounds_are_the_t_formula_on_absolute_and_squared_errors() -> None:
    y = np.array([0.0, 1.0, 2.0, 3.0])
    point = np.array([0.5, 1.0, 2.0, 2.0])
    hpc = np.array([0.0, 1.5, 2.0, 3.0])
    e = PairedErrors.of(y, point, hpc)
    d = np.abs(hpc - y) - np.abs(point - y)
    assert RULE_METRIC == "mae"
    assert e.difference == pytest.approx(d.mean())
    assert e.lower_bound == pytest.approx(d.mean() - 3.182446305 * d.std(ddof=1) / 2.0)
    s = (hpc - y) ** 2 - (point - y) ** 2
    assert e.mse_lower_bound == pytest.approx(s.mean() - 3.182446305 * s.std(ddof=1) / 2.0)


def test_an_extreme_target_widens_the_squared_bound_not_the_absolute_one() -> None:
    """The a-priori argument: |d_i| <= |hpc_i - point_i| whatever y_i, while a squared-error
    difference grows with the residual. Moving one target of 1,000 far away leaves the spread
    of the absolute-error differences (the rule's bound width) as it was and multiplies the
    squared-error differences' spread."""
    y, hpc = _rows(0, n=1000)
    point = hpc + np.random.default_rng(1).normal(scale=0.2, size=y.size)
    before = PairedErrors.of(y, point, hpc)
    y_far = y.copy()
    y_far[0] += 1000.0
    after = PairedErrors.of(y_far, point, hpc)
    assert after.sd == pytest.approx(before.sd, rel=0.01)
    assert after.lower_bound == pytest.approx(before.lower_bound, abs=0.01)
    assert after.sd_squared > 10 * before.sd_squared


def test_too_few_rows_never_certify() -> None:
    assert paired_error_bound(1.0, 0.0, 1) == -math.inf
    assert PairedErrors.of([], [], []).lower_bound == -math.inf


def test_refuses_bad_inputs() -> None:
    with pytest.raises(ValueError, match="same rows"):
        PairedErrors.of([1.0, 2.0], [1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        PairedErrors.of([1.0, 2.0], [1.0, math.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="HPC's validation MAE"):
        default_tolerance(math.nan)
    assert default_tolerance(2.0) == pytest.approx(0.1)
