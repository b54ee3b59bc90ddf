"""Operating points that hold on unseen data (issue 20 item 4): the Wilson interval of each
point's validation accuracy (``protocol.operating_points``) is stored with each point and shown by
``inspect`` and ``evaluate``; the marginal rule on its lower bound (``confidently_near``) stays for
the benchmarks. The default point is chosen by the paired rule since issue 36
(``test_operating_points_paired.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaptedge.cli.main import main
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import Manifest, OperatingPoint
from adaptedge.protocol.operating_points import (
    cheapest_reaching,
    confidently_near,
    wilson_interval,
)
from tests.support.toy_bundle import build_toy_bundle


def test_wilson_interval_matches_the_textbook_values() -> None:
    # 50 of 100, 95%: 0.4038 .. 0.5962; 0 of 10: 0 .. 0.2775 (Wilson 1927, as tabulated)
    assert wilson_interval(0.5, 100) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    assert wilson_interval(0.0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    low, high = wilson_interval(0.97, 4000)
    assert low < 0.97 < high and high - low == pytest.approx(0.0106, abs=5e-4)
    assert wilson_interval(0.9, 0) == (0.0, 1.0)


def _points(*spec: tuple[str, float, float]) -> list[OperatingPoint]:
    return [OperatingPoint(n, n, accuracy=a, cost=c) for n, a, c in spec]


def test_a_point_that_reaches_only_by_noise_is_not_chosen() -> None:
    # 2000 validation rows: 0.97 vs a 0.975 HPC is within 1% on the point estimate, but its
    # lower bound (0.962) is not; a dearer point with a margin is chosen instead
    pts = _points(("cheap", 0.97, 1.0), ("sure", 1.0, 5.0))
    assert cheapest_reaching(pts, 0.975 - 0.01) == 0          # the old rule
    assert confidently_near(pts, 0.975, 0.01, 2000) == 1
    assert confidently_near(pts, 0.975, 0.01, 2000, fallback=False) == 1
    # with a huge validation set the margin vanishes and the cheap point is chosen
    assert confidently_near(pts, 0.975, 0.01, 10**9) == 0
    # none reaches: the highest lower bound, or None without fallback
    low = _points(("a", 0.6, 1.0), ("b", 0.7, 2.0), ("c", 0.7, 3.0))
    assert confidently_near(low, 0.99, 0.01, 100) == 1
    assert confidently_near(low, 0.99, 0.01, 100, fallback=False) is None
    assert confidently_near([], 0.9, 0.01, 100) is None


def test_the_interval_is_an_optional_manifest_field(tmp_path: Path) -> None:
    raw = build_toy_bundle(tmp_path / "toy").to_dict()
    assert all("accuracy_interval" not in p for p in raw["operating_points"])
    raw["operating_points"][0]["accuracy_interval"] = [0.5, 0.9]
    m = Manifest.from_dict(raw)
    assert m.operating_points[0].accuracy_interval == (0.5, 0.9)
    assert m.to_dict()["operating_points"][0]["accuracy_interval"] == [0.5, 0.9]
    raw["operating_points"][0]["accuracy_interval"] = [0.9, 0.5]
    with pytest.raises(BundleError, match=r"operating_points\[0\]\.accuracy_interval"):
        Manifest.from_dict(raw)


def test_inspect_and_evaluate_show_the_interval(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    assert main(["train", "--data", "heart", "--method", "l1", "--quick", "--hpc", "hgb",
                 "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "validation 95% interval" in text and "split: heart, seed 0" in text
    assert main(["evaluate", "--bundle", str(out), "--data", "heart", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for point in report["points"]:
        low, high = point["validation_interval"]
        assert 0 <= low < high <= 1
