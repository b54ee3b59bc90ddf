"""The regression operating-point rule: "no worse than the HPC by more than a tolerance", on the
paired per-row squared errors of a point and the HPC on the same validation rows.

A regression point's score is ``-(validation MSE)`` (higher is better, as for accuracy), so
``paired_lower_bound`` keeps its meaning: a one-sided 97.5% lower confidence bound on (point
score - HPC score) = (HPC MSE - point MSE). ``operating_points.certified_near`` is unchanged:
a point is certified when its bound is >= ``-tolerance``, the tolerance in the data's squared
units (``default_tolerance``: ``DEFAULT_RELATIVE_TOLERANCE`` of the HPC's validation MSE).

The bound is Student's t on the per-row differences ``d_i = (hpc_i - y_i)^2 - (point_i - y_i)^2``:
``mean(d) - t(0.975, n-1) * sd(d) / sqrt(n)``. Deterministic (no resampling seed), valid by the
central limit theorem for the mean of i.i.d. differences with finite variance; on the rows where
the two predict the same value ``d_i`` is 0, so like the classification rule it only pays for
the rows where they disagree. docs/DESIGN.md says why not a bootstrap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

DEFAULT_RELATIVE_TOLERANCE = 0.05
"""Default tolerance of the regression rule, as a fraction of the HPC's validation MSE."""
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
    """A point's and the HPC's errors on the same rows, summarised: rows, both MSEs, the point's
    MAE, and the standard deviation of the per-row squared-error differences."""

    n: int
    point_mse: float
    hpc_mse: float
    point_mae: float
    sd: float

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
            return cls(0, 0.0, 0.0, 0.0, 0.0)
        ep, eh = (p - t) ** 2, (h - t) ** 2
        sd = float(np.std(eh - ep, ddof=1)) if t.size > 1 else 0.0
        return cls(int(t.size), float(ep.mean()), float(eh.mean()),
                   float(np.abs(p - t).mean()), sd)

    @property
    def difference(self) -> float:
        """HPC MSE - point MSE (the point's score minus the HPC's)."""
        return self.hpc_mse - self.point_mse

    @property
    def lower_bound(self) -> float:
        """``paired_error_bound`` of these errors."""
        return paired_error_bound(self.difference, self.sd, self.n)


def paired_error_bound(mean_difference: float, sd: float, n: int) -> float:
    """One-sided 97.5% lower confidence bound on (HPC MSE - point MSE) from the mean and
    standard deviation of ``n`` paired per-row differences (Student's t); ``-inf`` below 2
    rows (never certified)."""
    if n < 2:
        return -math.inf
    return mean_difference - t_quantile(n - 1) * sd / math.sqrt(n)


def default_tolerance(hpc_mse: float, relative: float = DEFAULT_RELATIVE_TOLERANCE) -> float:
    """The default tolerance in the data's squared units: ``relative`` x the HPC's validation
    MSE (0.05: a point may be certified when its MSE is at most ~5% above the HPC's)."""
    if not math.isfinite(hpc_mse) or hpc_mse < 0:
        raise ValueError(f"the HPC's validation MSE must be finite and >= 0, got {hpc_mse}")
    return relative * hpc_mse
