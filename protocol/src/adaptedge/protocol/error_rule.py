"""The regression operating-point rule: "no worse than the HPC by more than a tolerance", on the
paired per-row ABSOLUTE errors of a point and the HPC on the same validation rows (MAE).

A regression point's score is still ``-(validation MSE)`` (``OperatingPoint.accuracy``, the
manifest's contract), but its ``paired_lower_bound`` is now the rule's: a one-sided 97.5% lower
confidence bound on (HPC MAE - point MAE), in the target's unit. ``operating_points.
certified_near`` (fixed-sequence testing) is unchanged: a point is certified when its bound is
>= ``-tolerance``, the tolerance in the target's unit (``default_tolerance``:
``DEFAULT_RELATIVE_TOLERANCE`` of the HPC's validation MAE).

The bound is Student's t on the per-row differences ``d_i = |hpc_i - y_i| - |point_i - y_i|``:
``mean(d) - t(0.975, n-1) * sd(d) / sqrt(n)``. Why absolute, not squared errors: by the
triangle inequality ``|d_i| <= |hpc_i - point_i|``, so a row's difference is bounded by how far
the two predictions are apart, whatever the target's own tail; a squared-error difference is
``(hpc_i - point_i)(hpc_i + point_i - 2 y_i)``, the disagreement times the residual, so one
extreme target decides the mean and the sd (gas-concentration: the top 1% of rows carry 80-91%
of the HPC's squared error). The squared-error bound is still computed (``mse_lower_bound``)
for reports. On rows where the two predict the same value ``d_i`` is 0, so like the
classification rule the bound only pays for the rows where they disagree. docs/DESIGN.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

RULE_METRIC = "mae"
"""The error the rule compares (``paired_lower_bound``, ``metadata.tolerance``): mean absolute
error, in the target's unit."""
DEFAULT_RELATIVE_TOLERANCE = 0.05
"""Default tolerance of the regression rule, as a fraction of the HPC's validation MAE."""
_Z = 1.959963984540054  # standard normal quantile at 0.975


def t_quantile(df: float) -> float:
    """Student's t quantile at 0.975 with ``df`` degrees of freedom (Cornish-Fisher expansion
    around the normal quantile, Abramowitz & Stegun 26.7.5; exact tables below 5 df)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    small = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105}
    if df < 5:
        return small[int(df)]
    z = _Z
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return float(z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4)


@dataclass(frozen=True, slots=True)
class PairedErrors:
    """A point's and the HPC's errors on the same rows, summarised: rows, both MSEs and MAEs,
    and the standard deviations of the per-row absolute- and squared-error differences."""

    n: int
    point_mse: float
    hpc_mse: float
    point_mae: float
    hpc_mae: float
    sd: float
    """Of the per-row absolute-error differences (the rule's)."""
    sd_squared: float
    """Of the per-row squared-error differences (reported, not the rule)."""

    @classmethod
    def of(cls, y: npt.ArrayLike, point: npt.ArrayLike, hpc: npt.ArrayLike) -> PairedErrors:
        """From targets and the two predictions (same rows, same order, all finite)."""
        t, p, h = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (y, point, hpc))
        if not t.shape == p.shape == h.shape:
            raise ValueError(f"targets and predictions differ in length: {t.size}, {p.size}, "
                             f"{h.size}; pass the same rows in the same order")
        if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p)) and np.all(np.isfinite(h))):
            raise ValueError("targets and predictions must be finite (NaN or inf found)")
        if t.size == 0:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        ap, ah = np.abs(p - t), np.abs(h - t)
        sp, sh = ap**2, ah**2
        two = t.size > 1
        return cls(int(t.size), float(sp.mean()), float(sh.mean()), float(ap.mean()),
                   float(ah.mean()), float(np.std(ah - ap, ddof=1)) if two else 0.0,
                   float(np.std(sh - sp, ddof=1)) if two else 0.0)

    @property
    def difference(self) -> float:
        """HPC MAE - point MAE (positive: the point is better), the rule's difference."""
        return self.hpc_mae - self.point_mae

    @property
    def lower_bound(self) -> float:
        """The rule's bound: ``paired_error_bound`` of the absolute-error differences."""
        return paired_error_bound(self.difference, self.sd, self.n)

    @property
    def mse_lower_bound(self) -> float:
        """The same bound on (HPC MSE - point MSE), squared units: reported, never the rule
        (heavy-tailed targets make it follow a few rows; see the module docstring)."""
        return paired_error_bound(self.hpc_mse - self.point_mse, self.sd_squared, self.n)


def paired_error_bound(mean_difference: float, sd: float, n: int) -> float:
    """One-sided 97.5% lower confidence bound on the mean of ``n`` paired per-row differences
    (HPC error - point error) from their mean and standard deviation (Student's t); ``-inf``
    below 2 rows (never certified)."""
    if n < 2:
        return -math.inf
    return mean_difference - t_quantile(n - 1) * sd / math.sqrt(n)


def default_tolerance(hpc_mae: float, relative: float = DEFAULT_RELATIVE_TOLERANCE) -> float:
    """The default tolerance in the target's unit: ``relative`` x the HPC's validation MAE
    (0.05: a point may be certified when its MAE is at most ~5% above the HPC's)."""
    if not math.isfinite(hpc_mae) or hpc_mae < 0:
        raise ValueError(f"the HPC's validation MAE must be finite and >= 0, got {hpc_mae}")
    return relative * hpc_mae
