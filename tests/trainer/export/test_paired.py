"""Each exported point's paired outcomes against the HPC (issue 36): counted on the validation
rows with the exported ONNX, stored as the point's ``paired_lower_bound``, and what the default
is chosen by; test rows never enter."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaptedge.protocol.operating_points import PairedCounts
from adaptedge.trainer.api import default_chooser
from adaptedge.trainer.data.datasets import Dataset, load_dataset
from adaptedge.trainer.export.bundle import export_bundle
from adaptedge.trainer.policy.oracle import BundleRunner
from tests.trainer.export.test_bundle import fit_heart_hpc, heart_policies


@pytest.fixture(scope="module")
def heart() -> Dataset:
    return load_dataset("heart")


def test_the_counts_and_the_default_see_only_validation(heart: Dataset, tmp_path: Path) -> None:
    hpc = fit_heart_hpc(heart)
    policies = heart_policies(heart)
    seen: list[list[PairedCounts]] = []

    def choose(paired: list[PairedCounts]) -> tuple[str, dict[str, Any]]:
        seen.append(paired)
        return default_chooser(policies, None, total_rows=303)(paired)

    a = export_bundle(tmp_path / "a", heart, hpc, policies, choose=choose)
    runner = BundleRunner.from_dir(tmp_path / "a")
    hpc_right = runner.hpc_proba(heart.X_val).argmax(axis=1) == heart.y_val
    for point, counts in zip(a.operating_points, seen[0], strict=True):
        right = runner.evaluate(point.policy, heart.X_val).labels == heart.y_val
        assert counts == PairedCounts(both=int(np.sum(right & hpc_right)),
                                      point_only=int(np.sum(right & ~hpc_right)),
                                      hpc_only=int(np.sum(~right & hpc_right)),
                                      neither=int(np.sum(~right & ~hpc_right)))
        assert point.paired_lower_bound == counts.lower_bound
    bounds = [c.lower_bound for c in seen[0]]
    assert a.metadata["certified"] is any(b >= -0.01 for b in bounds)
    # the same bundle from data whose test rows are scrambled: nothing the rule saw changes
    scrambled = replace(heart, X_test=heart.X_test[::-1].copy(),
                        y_test=(heart.n_classes - 1) - heart.y_test[::-1])
    b = export_bundle(tmp_path / "b", scrambled, hpc, policies, choose=choose)
    assert seen[1] == seen[0]
    assert b.operating_points == a.operating_points
    assert b.default_operating_point == a.default_operating_point
    assert b.metadata["default_rule"] == a.metadata["default_rule"]


def test_without_a_chooser_every_point_still_gets_its_bound(heart: Dataset,
                                                              tmp_path: Path) -> None:
    m = export_bundle(tmp_path / "c", heart, fit_heart_hpc(heart), heart_policies(heart),
                      default="walk")
    assert m.default_operating_point == "walk"
    assert all(p.paired_lower_bound is not None and -1 <= p.paired_lower_bound <= 1
               for p in m.operating_points)
