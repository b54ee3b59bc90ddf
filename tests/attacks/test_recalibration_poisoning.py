"""One device cannot steer recalibration (issue: 3,000 fabricated audits from one device moved
the chosen point from escalation 0.976 to 0.529): an honest device replays letter-binary at an
audit fraction of 0.05; an attacker device sends 3,000 audits of inputs it chose (ones the local
model answers like the HPC, so every candidate looks right on them), each claiming a small audit
fraction. The choice may move by at most one step of the honest run's bias grid."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main
from adaptedge.protocol import Manifest, verify, write_bundle
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.protocol.fleet_rows import LabelledRow
from adaptedge.protocol.operating_points import within_budget
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.policy.oracle import BundleRunner
from adaptedge.trainer.recalibrate import recalibrate

HONEST = AuditPolicy(fraction=0.05, seed=0)


def _honest_rows(manifest: Manifest, runner: BundleRunner, X: np.ndarray, policy: str,
                 device: str = "dev1") -> list[LabelledRow]:
    """What the store holds after ``device`` replayed ``X``: every escalation, 5% audits."""
    result = runner.evaluate(policy, X)
    hpc = np.argmax(runner.hpc_proba(X), axis=1)
    audited = HONEST.selected_many(device, np.arange(len(X)), 0) & ~result.escalated
    return [LabelledRow(device, manifest.bundle_id, int(i),
                        "escalated" if result.escalated[i] else "audit", 0,
                        tuple(float(v) for v in X[i]),
                        None if result.escalated[i] else int(result.labels[i]), int(hpc[i]),
                        float(i), HONEST.fraction)
            for i in np.flatnonzero(result.escalated | audited)]


def _fabricated(manifest: Manifest, runner: BundleRunner, X: np.ndarray, n: int,
                claimed: float, policy: str) -> list[LabelledRow]:
    """``n`` audits of inputs the attacker chose: answered locally, like the HPC would."""
    result = runner.evaluate(policy, X)
    hpc = np.argmax(runner.hpc_proba(X), axis=1)
    pool = np.flatnonzero(~result.escalated & (result.labels == hpc))
    pick = np.random.default_rng(0).choice(pool, n, replace=pool.size < n)
    return [LabelledRow("evil", manifest.bundle_id, 10**9 + k, "audit", 0,
                        tuple(float(v) for v in X[i]), int(hpc[i]), int(hpc[i]), 1e6 + k,
                        claimed)
            for k, i in enumerate(pick)]


def _one_policy_bundle(trained: Path, out: Path, budget: float) -> Manifest:
    """The trained bundle cut to the operating point ``edge run --budget`` would run (one
    policy: its bias grid is the whole candidate list, and recalibration stays quick)."""
    manifest = verify(trained)
    point = manifest.operating_points[within_budget(manifest.operating_points, budget) or 0]
    graph = manifest.policies[point.policy]
    used = {manifest.hpc.file} | {n.model.file for n in graph.nodes.values()}
    return write_bundle(out, replace(
        manifest, bundle_id="pending", policies={point.policy: graph},
        operating_points=(point,), default_operating_point=point.name, files={},
        budget_index=None), {f: (trained / f).read_bytes() for f in sorted(used)})


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest, BundleRunner]:
    """The README's fleet loop bundle (``train --data letter-binary --method adapt-lin
    --quick``) at the point of ``edge run --budget 8``."""
    root = tmp_path_factory.mktemp("poison")
    assert main(["train", "--data", "letter-binary", "--method", "adapt-lin", "--quick",
                 "--out", str(root / "lb")]) == 0
    manifest = _one_policy_bundle(root / "lb", root / "bundle", 8.0)
    return root / "bundle", manifest, BundleRunner.from_dir(root / "bundle")


@pytest.mark.slow
@pytest.mark.parametrize("claimed", [0.02, 0.001])
def test_3000_fabricated_audits_move_the_choice_at_most_one_grid_step(
        fleet: tuple[Path, Manifest, BundleRunner], tmp_path: Path, claimed: float) -> None:
    bundle, manifest, runner = fleet
    policy = manifest.operating_points[0].policy
    ds = load_dataset("letter-binary")
    honest = _honest_rows(manifest, runner, ds.X_test.astype(np.float32), policy)
    fake = _fabricated(manifest, runner, ds.X_train.astype(np.float32), 3000, claimed, policy)
    clean = recalibrate(bundle, honest, tmp_path / "clean")
    poisoned = recalibrate(bundle, honest + fake, tmp_path / "poisoned")
    grid = sorted(e.bias for e in clean.candidates)
    i = grid.index(clean.chosen.bias)
    low, high = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    assert low <= poisoned.chosen.bias <= high, (clean.chosen, poisoned.chosen)
    # the fabricated rows are in the estimate, but weigh no more than the honest device
    shares = poisoned.manifest.metadata["recalibration"]["devices"]
    assert shares["evil"]["share_before_cap"] > 0.5 and shares["evil"]["share"] <= 0.5 + 1e-9
