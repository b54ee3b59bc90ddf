"""``trainer.api.choose_default`` with held-out certify rows (issue 36): the fixed sequence
runs on the certify rows' bounds by validation cost; when nothing is certified the default is
the most accurate point on every validation row (selection and certify together)."""

from __future__ import annotations

from dataclasses import dataclass

from adaptedge.protocol.operating_points import PairedCounts
from adaptedge.trainer.api import choose_default


@dataclass(frozen=True)
class V:
    accuracy: float
    cost: float


@dataclass(frozen=True)
class G:
    name: str
    validation: V


def test_certified_on_the_held_out_rows_in_sequence() -> None:
    front = [G("cheap", V(0.96, 1.0)), G("mid", V(0.97, 2.0)), G("full", V(0.98, 3.0))]
    good = PairedCounts(both=440, point_only=4, hpc_only=0, neither=6)
    bad = PairedCounts(both=420, point_only=0, hpc_only=24, neither=6)
    point, rule, certified = choose_default(front, [bad, good, good], None, selection_rows=450)
    assert certified is True and point.name == "mid"
    assert "450 held-out certify rows" in rule and "2 of 3 passed" in rule


def test_nothing_certified_picks_the_most_accurate_on_every_validation_row() -> None:
    """On the 50 selection rows "a" looks best (0.98 vs 0.96); on the 50 certify rows "b" is
    right on 50 and "a" on 44, so over all 100 rows b (0.98) beats a (0.92): b is the default.
    With ``selection_rows`` 0 the counts are on the selection rows themselves and the stored
    validation accuracy decides (a)."""
    front = [G("a", V(0.98, 1.0)), G("b", V(0.96, 2.0))]
    a = PairedCounts(both=44, point_only=0, hpc_only=6, neither=0)
    b = PairedCounts(both=50, point_only=0, hpc_only=0, neither=0)
    point, rule, certified = choose_default(front, [a, b], None, selection_rows=50)
    assert certified is False and point.name == "b"
    assert rule.startswith("NOT certified") and "50 held-out certify rows" in rule
    point, _, certified = choose_default(front, [a, b], None)
    assert certified is False and point.name == "a"
