"""Issue 21 item 5: ``adaptedge train`` says how many candidate policies its sweep walked and why
the bundle keeps only the validation front (a default sweep "kept 2" while ``--quick`` "kept 33",
and the count printed was the method's own front, "N points (of N candidates)")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adaptedge.cli.main import main as cli
from adaptedge.trainer.policy.frontier import Front, kept_summary, pareto_frontier
from adaptedge.trainer.policy.graph import Metrics
from tests.cli.test_tour import write_csv


class _Point:
    def __init__(self, accuracy: float, cost: float) -> None:
        self.validation = Metrics(accuracy=accuracy, cost=cost, escalation_rate=0.0,
                                  avg_sensors_read=1.0)


def test_a_front_of_a_front_remembers_the_candidates_swept() -> None:
    points = [_Point(0.7, 1.0), _Point(0.6, 2.0), _Point(0.8, 3.0), _Point(0.8, 4.0)]
    front = pareto_frontier(points)
    assert isinstance(front, Front) and len(front) == 2 and front.swept == 4
    again = pareto_frontier(front)  # the trainer prunes a method's own front once more
    assert len(again) == 2 and again.swept == 4
    assert kept_summary(2, 4).startswith("kept 2 of 4 candidate policies")
    assert "dominated" in kept_summary(2, 4) and "none" in kept_summary(4, 4)


def test_train_prints_how_many_candidates_the_front_was_kept_from(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from adaptedge.protocol.bundle import verify

    data = write_csv(tmp_path / "data.csv")
    out = tmp_path / "b"
    assert cli(["train", "--data", str(data), "--target", "label", "--method", "confidence",
                "--quick", "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    manifest = verify(out)
    kept, swept = len(manifest.operating_points), int(manifest.metadata["n_candidates"])
    # the quick tuned cascade: 2 families (hgb, lr) x k = 1, 2, 4 of 4 sensors x 21 validation
    # quantiles of the top probability (on the selection half of validation), less the
    # thresholds that coincide
    assert 2 * 3 * 15 < swept <= 2 * 3 * 21 and kept < swept
    assert f"{kept} operating points on the validation frontier (of {swept} candidates)" \
        in printed
    match = re.search(r"Frontier: kept (\d+) of (\d+) candidate policies: each of the other "
                      r"(\d+) costs as much or more", printed)
    assert match is not None and match.groups() == (str(kept), str(swept), str(swept - kept))


@pytest.mark.parametrize("budget", ["-1", "nan", "inf"])
def test_a_budget_that_is_no_cost_is_refused_before_training(
        budget: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_csv(tmp_path / "data.csv")
    assert cli(["train", "--data", str(data), "--target", "label", "--method", "confidence",
                "--quick", "--budget", budget, "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "--budget must be a finite cost >= 0" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()
