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


@dataclass(frozen=True)
class M:
    name: str
    validation: V
    method: str


def test_a_merged_front_is_tested_in_one_sequence_per_method() -> None:
    """The cascade's 5 passes, cegb's 4 fails, the DAG's 3 and 2 pass on the certify rows: the
    one merged sequence would stop at 4; per method the DAG's 2 is the default, the rule says
    so, and the chooser records every sequence with its alpha share for ``evaluate``."""
    from adaptedge.protocol.method_sequences import SEQUENCES_KEY
    from adaptedge.trainer.api import default_chooser

    front = [M("c5", V(0.97, 5.0), "confidence"), M("e4", V(0.95, 4.0), "cegb"),
             M("d3", V(0.97, 3.0), "dag"), M("d2", V(0.97, 2.0), "dag")]
    good = PairedCounts(both=1940, point_only=30, hpc_only=30, neither=0)
    bad = PairedCounts(both=1900, point_only=10, hpc_only=90, neither=0)
    paired = [good, bad, good, good]
    point, rule, certified = choose_default(front, paired, None, selection_rows=2000,
                                            hpc_accuracy=0.97)
    assert certified is True and point.name == "d2"
    assert "certified by the dag method's sequence" in rule and "2 of its 2 points" in rule and "by 2 of 3 methods" in rule
    name, extra = default_chooser(front, None, selection_rows=2000, hpc_accuracy=0.97)(paired)
    record = extra[SEQUENCES_KEY]
    assert name == "d2" and extra["certified"] is True
    assert record["methods"]["dag"]["points"] == ["d3", "d2"]
    assert sum(m["alpha"] for m in record["methods"].values()) == 0.025
    one = [G("c5", V(0.97, 5.0)), G("e4", V(0.95, 4.0)), G("d3", V(0.97, 3.0))]
    name, extra = default_chooser(one, None, selection_rows=2000)(paired[:3])
    assert name == "c5" and SEQUENCES_KEY not in extra  # one method: the one sequence
