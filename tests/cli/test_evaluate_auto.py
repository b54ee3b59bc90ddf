"""``adaptedge train --method auto`` then ``adaptedge evaluate`` (issue 36): a front merged
from several methods records one fixed sequence per method (alpha shares summing to 0.025,
every point in its own method's sequence, each bound at its share), ``train`` says in one line
which method's sequence certified the default, and ``evaluate`` re-checks the sequences on the
held-out certify rows and certifies the same default."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main
from adaptedge.protocol.bundle import verify
from adaptedge.protocol.method_sequences import SEQUENCES_KEY


def _csv(path: Path) -> Path:
    """3,000 rows, the label a fixed function of two features (no noise): cheap points agree
    with the HPC on almost every row, and both methods reach the merged front."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(3000, 5))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, "yes", "no")
    lines = ["a,b,c,d,e,label", *(",".join([*(f"{v:.5f}" for v in x), t])
                                  for x, t in zip(X, y, strict=True))]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_auto_records_per_method_sequences_and_evaluate_agrees(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, bundle = _csv(tmp_path / "d.csv"), tmp_path / "b"
    assert main(["train", "--data", str(data), "--target", "label", "--method", "auto",
                 "--quick", "--no-progress", "--param", "methods=confidence,dag",
                 "--val-fraction", "0.5", "--certify-fraction", "0.8",
                 "--out", str(bundle)]) == 0
    said = capsys.readouterr().out
    m = verify(bundle)
    methods = {p.method for p in m.operating_points}
    record = m.metadata[SEQUENCES_KEY]
    assert methods == {"confidence", "dag"} and m.metadata["certified"] is True
    assert sum(s["alpha"] for s in record["methods"].values()) == pytest.approx(0.025)
    named = [n for s in record["methods"].values() for n in s["points"]]
    assert sorted(named) == sorted(p.name for p in m.operating_points)
    by_name = {p.name: p for p in m.operating_points}
    for method, s in record["methods"].items():
        assert all(by_name[n].method == method for n in s["points"])
        costs = [by_name[n].cost for n in s["points"]]
        assert costs == sorted(costs, reverse=True)  # most expensive first
        assert all(b is None or -1.0 <= b <= 1.0 for b in s["bounds"])
    assert main(["evaluate", "--bundle", str(bundle), "--data", str(data), "--target",
                 "label", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    best = report["best_within_1pct"]
    assert best is not None and best["name"] == m.default_operating_point
    assert f"certified by the {best['certified_by']} method's sequence" in said
    seq = record["methods"][best["certified_by"]]
    assert m.default_operating_point in seq["points"][: seq["passed"]]
    at = {p["name"]: p for p in report["points"]}
    for s in record["methods"].values():  # the 97.5% bound here never above the stricter one
        for n, b in zip(s["points"], s["bounds"], strict=True):
            assert b is None or b <= at[n]["validation_paired_bound"] + 1e-12
