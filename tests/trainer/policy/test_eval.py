"""policy_eval: the batched walk equals a row-by-row walk, and every row's cost equals
protocol.costs.decision_cost; the always-cloud HPC costs hpc_cost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.protocol.costs import decision_cost, hpc_cost
from adaptedge.protocol.manifest import Manifest
from adaptedge.trainer.policy.oracle import BundleRunner, evaluate_policy
from tests.support.reference_walk import ReferenceWalk


def _row_walk(root: Path, m: Manifest, policy: str, x: np.ndarray
              ) -> tuple[int, bool, set[str], int]:
    """One row, one node at a time, through the shared reference walk (independent of
    policy_eval): (answer, escalated, sensors read, nodes visited)."""
    step = ReferenceWalk(root, m).walk(policy, x)
    return step["answer"], step["escalated"], set(step["sensors_read"]), len(step["nodes"])


@pytest.mark.parametrize("policy", ["gate", "walk"])
def test_batched_walk_matches_row_walk_and_decision_cost(
        toy_bundle: tuple[Path, Manifest], policy: str) -> None:
    root, m = toy_bundle
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3)).astype(np.float32) * 2
    y = rng.integers(0, 2, size=60)
    res = evaluate_policy(root, policy, X, y)
    assert res.escalated.any() and (~res.escalated).any()  # both branches exercised
    for i in range(len(X)):
        label, escalated, read, visits = _row_walk(root, m, policy, X[i])
        assert res.labels[i] == label and res.escalated[i] == escalated
        assert res.nodes_visited[i] == visits
        assert set(np.array(res.sensor_names)[res.sensors_read[i]]) == read
        want = decision_cost(m, read, escalated)
        assert res.cost[i] == pytest.approx(want.scalar, rel=1e-12)
        assert res.energy_mj[i] == pytest.approx(want.energy_mj, rel=1e-12)
        assert res.latency_ms[i] == pytest.approx(want.latency_ms, rel=1e-12)
        assert res.money[i] == pytest.approx(want.money, rel=1e-12, abs=1e-15)
        assert res.bytes[i] == want.bytes
    assert res.accuracy == pytest.approx(float(np.mean(res.labels == y)))
    assert res.escalation_rate == pytest.approx(float(res.escalated.mean()))
    assert res.mean_cost == pytest.approx(float(res.cost.mean()))
    assert set(res.source.tolist()) == {"local", "cloud"}


def test_walk_reads_more_sensors_on_some_rows(toy_bundle: tuple[Path, Manifest]) -> None:
    root, _ = toy_bundle
    X = np.random.default_rng(1).normal(size=(200, 3)).astype(np.float32) * 3
    res = evaluate_policy(root, "walk", X)
    assert set(res.nodes_visited.tolist()) >= {2, 3}
    assert np.isnan(res.accuracy)


def test_always_cloud_costs_hpc_cost(toy_bundle: tuple[Path, Manifest]) -> None:
    root, m = toy_bundle
    X = np.random.default_rng(2).normal(size=(10, 3)).astype(np.float32)
    res = BundleRunner.from_dir(root).evaluate_hpc(X)
    assert res.escalation_rate == 1.0
    assert res.cost == pytest.approx(np.full(10, hpc_cost(m).scalar))
    assert res.bytes.tolist() == [hpc_cost(m).bytes] * 10


def test_errors_name_the_problem(toy_bundle: tuple[Path, Manifest]) -> None:
    root, m = toy_bundle
    with pytest.raises(KeyError, match="no policy 'nope'"):
        evaluate_policy(root, "nope", np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"X must be \[N, 3\]"):
        evaluate_policy(root, "gate", np.zeros((1, 4)))
    with pytest.raises(ValueError, match="pass root="):
        evaluate_policy(m, "gate", np.zeros((1, 3)))
    assert evaluate_policy(m, "gate", np.zeros((2, 3)), root=root).labels.shape == (2,)


def test_reused_runs_equal_fresh_runs(toy_bundle: tuple[Path, Manifest]) -> None:
    """``reuse_runs`` (the export's walks): a model runs once per rows, read-only, and every
    policy's walk equals a runner's that runs each time."""
    from adaptedge.protocol.manifest import PROBA_OUTPUT

    bundle, manifest = toy_bundle
    files = {name: (bundle / name).read_bytes() for name in manifest.files}
    X = np.random.default_rng(5).normal(size=(400, 3)).astype(np.float32)
    reusing = BundleRunner.from_files(manifest, files, reuse_runs=True)
    fresh = BundleRunner.from_files(manifest, files)
    for _ in range(2):
        for point in manifest.operating_points:
            got, want = reusing.evaluate(point.policy, X), fresh.evaluate(point.policy, X)
            for field in ("labels", "probabilities", "escalated", "cost"):
                assert getattr(got, field).tobytes() == getattr(want, field).tobytes(), field
    graph = manifest.policies[manifest.operating_points[0].policy]
    model = graph.nodes[graph.root].model
    rows = X[:, list(model.inputs)]
    first = reusing.run(model.file, rows, [PROBA_OUTPUT])[0]
    assert reusing.run(model.file, rows.copy(), [PROBA_OUTPUT])[0] is first
    assert not first.flags.writeable
    other = reusing.run(model.file, rows[::-1], [PROBA_OUTPUT])[0]
    assert other is not first
    assert other.tobytes() == fresh.run(model.file, rows[::-1], [PROBA_OUTPUT])[0].tobytes()
