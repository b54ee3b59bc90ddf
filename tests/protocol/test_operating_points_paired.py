"""The paired non-inferiority rule (``protocol.operating_points``, issue 36): Tango's score
bound on (a point's accuracy - the HPC's) on the same validation rows, checked against
published values, against the marginal rule it replaces, and by simulation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import BUNDLE_SCHEMA_VERSION, Manifest
from adaptedge.protocol.operating_points import (
    PairedCounts,
    certified_near,
    confidently_near,
    paired_lower_bound,
    rows_to_certify,
    wilson_interval,
)
from tests.support.toy_bundle import build_toy_bundle

Z2 = 1.959963984540054 ** 2


class P:
    def __init__(self, accuracy: float, cost: float) -> None:
        self.accuracy, self.cost = accuracy, cost


def test_tango_bound_matches_the_textbook_example() -> None:
    """Fagerland, Lydersen & Laake (2017), Statistical Analysis of Contingency Tables, ch. 8:
    complete response before/after consolidation therapy (Cavo et al. 2012), the paired table
    [[59, 6], [16, 80]]: difference -0.0621, Tango asymptotic score 95% CI (-0.1240, -0.0054)."""
    cavo = PairedCounts(both=59, point_only=6, hpc_only=16, neither=80)
    assert cavo.difference == pytest.approx(-0.0621, abs=5e-5)
    assert cavo.lower_bound == pytest.approx(-0.1240, abs=5e-5)
    # the upper end is the lower bound with the roles swapped
    assert -paired_lower_bound(16, 6, 161) == pytest.approx(-0.0054, abs=5e-5)


def test_with_the_reference_right_everywhere_it_is_the_wilson_bound() -> None:
    """Agreement with the HPC (recalibration): no point-only rows; the paired bound on
    (agreement - 1) is the Wilson lower bound of the agreement, minus 1."""
    for n, wrong in [(60, 0), (60, 3), (200, 2), (61.5, 2.3), (1000, 10)]:
        low = wilson_interval(1 - wrong / n, round(n))[0] if n == round(n) else None
        got = paired_lower_bound(0, wrong, n)
        if low is not None:
            assert got == pytest.approx(low - 1, abs=1e-12)
        assert -1 < got < -wrong / n or wrong == 0


def test_no_discordant_pairs_still_leave_a_margin() -> None:
    """An exact copy of the HPC: the bound is -z^2 / (n + z^2), not 0; so at 1% tolerance it
    certifies from 381 validation rows on, never on 380."""
    for n in (100, 300, 1000):
        assert paired_lower_bound(0, 0, n) == pytest.approx(-Z2 / (n + Z2), rel=1e-9)
    copy = PairedCounts(both=294, point_only=0, hpc_only=0, neither=6)
    assert rows_to_certify(copy, 0.01) == 381
    assert paired_lower_bound(0, 0, 380) < -0.01 <= paired_lower_bound(0, 0, 381)
    assert paired_lower_bound(0, 0, 0) == -1.0


def test_paired_rule_certifies_where_the_marginal_rule_cannot() -> None:
    """300 validation rows, HPC right on 294 (0.98); the policy agrees with the HPC on all but
    2 rows, both of which it gets right. The marginal rule (Wilson bound of 0.9867 on 300 rows
    vs 0.98 - 0.01) cannot pass it; the paired bound on the difference can."""
    point = PairedCounts(both=294, point_only=2, hpc_only=0, neither=4)
    accuracy = (point.both + point.point_only) / point.n
    assert confidently_near([P(accuracy, 1.0)], 0.98, 0.01, 300, fallback=False) is None
    assert point.lower_bound >= -0.01
    assert certified_near([P(accuracy, 1.0)], [point.lower_bound], 0.01, fallback=False) == 0
    # disagreeing on 2 rows one each way: 500 rows certify it; the marginal rule still cannot
    even = PairedCounts(both=489, point_only=1, hpc_only=1, neither=9)
    assert even.lower_bound >= -0.01
    assert confidently_near([P(0.98, 1.0)], 0.98, 0.01, 500, fallback=False) is None


def test_paired_rule_refuses_a_point_worse_than_the_tolerance() -> None:
    """2,000 rows, the policy right where the HPC is wrong on 10 and wrong where it is right on
    50: 2% worse. Refused, and no number of rows would certify it."""
    worse = PairedCounts(both=1900, point_only=10, hpc_only=50, neither=40)
    assert worse.difference == pytest.approx(-0.02)
    assert worse.lower_bound < -0.02 < -0.01
    assert certified_near([P(0.955, 1.0)], [worse.lower_bound], 0.01, fallback=False) is None
    assert rows_to_certify(worse, 0.01) is None
    at_edge = PairedCounts(both=1900, point_only=10, hpc_only=30, neither=60)  # exactly -1%
    assert rows_to_certify(at_edge, 0.01) is None


def test_the_bound_holds_its_level_by_simulation() -> None:
    """A point exactly 1% worse than the HPC (the tolerance's edge) is certified in at most
    ~2.5% of validation draws; one as good as the HPC is certified almost always."""
    rng = np.random.default_rng(36)
    for n, p10, p01 in [(800, 0.005, 0.015), (2000, 0.01, 0.02)]:
        draws = rng.multinomial(n, [1 - p10 - p01 - 0.01, p10, p01, 0.01], size=3000)
        pairs, counts = np.unique(draws[:, 1:3], axis=0, return_counts=True)
        certified = sum(int(k) for (b, c), k in zip(pairs, counts, strict=True)
                        if paired_lower_bound(int(b), int(c), n) >= -0.01)
        assert certified / len(draws) <= 0.035
    draws = rng.multinomial(3000, [0.975, 0.005, 0.005, 0.015], size=500)
    good = [paired_lower_bound(int(b), int(c), 3000) >= -0.01 for _, b, c, _ in draws]
    assert np.mean(good) >= 0.95


def test_rows_to_certify_is_the_first_count_that_certifies() -> None:
    point = PairedCounts(both=290, point_only=1, hpc_only=2, neither=7)  # 300 rows, -1/300
    rows = rows_to_certify(point, 0.01)
    assert rows is not None and rows > 300
    rate_b, rate_c = 1 / 300, 2 / 300
    assert paired_lower_bound(rate_b * rows, rate_c * rows, rows) >= -0.01
    assert paired_lower_bound(rate_b * (rows - 1), rate_c * (rows - 1), rows - 1) < -0.01


def test_certified_near_picks_cheapest_certified_else_most_accurate() -> None:
    pts = [P(0.95, 1.0), P(0.97, 2.0), P(0.975, 2.0), P(0.99, 5.0), P(0.99, 4.0)]
    assert certified_near(pts, [-0.5, -0.009, -0.001, 0.0, 0.0], 0.01) == 2  # tie: accurate
    # the fixed sequence stops at the unknown bound of the 4.0 point; one by one, 2 passes
    assert certified_near(pts, [-0.5, -0.009, -0.001, 0.0, None], 0.01) == 3
    assert certified_near(pts, [-0.5, -0.009, -0.001, 0.0, None], 0.01, sequential=False) == 2
    assert certified_near(pts, [-0.5, -0.2, -0.2, -0.2, -0.2], 0.01) == 4  # cheaper of best
    assert certified_near(pts, [None] * 5, 0.01, fallback=False) is None
    assert certified_near([], [], 0.01) is None
    with pytest.raises(ValueError, match="2 bounds for 5 points"):
        certified_near(pts, [0.0, 0.0], 0.01)


def test_counts_from_outcomes() -> None:
    c = PairedCounts.of([True, True, False, False, True], [True, False, True, False, True])
    assert c == PairedCounts(both=2, point_only=1, hpc_only=1, neither=1) and c.n == 5
    assert PairedCounts(0, 0, 0, 0).difference == 0.0
    with pytest.raises(ValueError):
        PairedCounts.of([True], [True, False])


def test_the_bound_is_an_optional_manifest_field(tmp_path: Path) -> None:
    """Old bundles (no field) read as before, on the same schema version; a stored bound
    round-trips; a bound outside [-1, 1] is refused with its path."""
    raw = build_toy_bundle(tmp_path / "toy").to_dict()
    assert raw["schema_version"] == BUNDLE_SCHEMA_VERSION == 1
    assert all("paired_lower_bound" not in p for p in raw["operating_points"])
    assert Manifest.from_dict(raw).operating_points[0].paired_lower_bound is None
    raw["operating_points"][0]["paired_lower_bound"] = -0.0061
    m = Manifest.from_dict(raw)
    assert m.operating_points[0].paired_lower_bound == -0.0061
    assert m.to_dict()["operating_points"][0]["paired_lower_bound"] == -0.0061
    for bad in (-1.5, 2.0, "x"):
        raw["operating_points"][0]["paired_lower_bound"] = bad
        with pytest.raises(BundleError, match=r"operating_points\[0\]\.paired_lower_bound"):
            Manifest.from_dict(raw)


def test_the_method_is_an_optional_manifest_field(tmp_path: Path) -> None:
    """``train --method auto`` records each point's method; bundles without it read as before
    (no key written); a method that is not a non-empty string is refused with its path."""
    raw = build_toy_bundle(tmp_path / "toy").to_dict()
    assert all("method" not in p for p in raw["operating_points"])
    assert Manifest.from_dict(raw).operating_points[0].method is None
    raw["operating_points"][0]["method"] = "dag"
    m = Manifest.from_dict(raw)
    assert m.operating_points[0].method == "dag"
    assert m.to_dict()["operating_points"][0]["method"] == "dag"
    for bad in ("", 3):
        raw["operating_points"][0]["method"] = bad
        with pytest.raises(BundleError, match=r"operating_points\[0\]\.method"):
            Manifest.from_dict(raw)
