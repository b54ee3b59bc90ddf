"""The walk's two drivers agree on the same bundle: the edge runtime's per-row walk
(``protocol.walk.walk_row``) and the trainer's batched float32 oracle (``trainer.policy.oracle``
over ``protocol.walk.walk_batch``): labels, escalations, sensors, final node, costs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from adaptedge.edge import EdgeRuntime
from adaptedge.protocol import Manifest
from adaptedge.trainer.policy import oracle as policy_eval
from tests.support.dataset_bundle import build_dataset_bundle
from tests.support.edge_doubles import HpcUplink
from tests.support.reference_walk import ReferenceWalk


def assert_parity(path: Path, manifest: Manifest, policy: str, X: np.ndarray) -> set[str]:
    reference = policy_eval.evaluate_policy(path, policy, X)
    rt = EdgeRuntime.load(path, operating_point=_point_of(manifest, policy),
                          uplink=HpcUplink(ReferenceWalk(path, manifest)))
    names = reference.sensor_names
    sources: set[str] = set()
    for i, row in enumerate(X):
        d = rt.predict_row(row)
        sources.add(d.source)
        assert d.escalated == bool(reference.escalated[i]), i
        assert d.label_index == int(reference.labels[i]), i
        assert set(d.sensors_read) == {n for n, r in zip(names, reference.sensors_read[i],
                                                         strict=True) if r}, i
        assert d.nodes[-1] == str(reference.final_node[i]), i
        assert len(d.nodes) == int(reference.nodes_visited[i]), i
        assert d.cost.scalar == pytest.approx(float(reference.cost[i])), i
        assert d.cost.energy_mj == pytest.approx(float(reference.energy_mj[i])), i
        assert d.cost.latency_ms == pytest.approx(float(reference.latency_ms[i])), i
        assert d.cost.bytes == int(reference.bytes[i]), i
    assert d.source in ("local", "cloud")
    return sources


def _point_of(manifest: Manifest, policy: str) -> str:
    return next(p.name for p in manifest.operating_points if p.policy == policy)


@pytest.mark.parametrize("policy", ["gate", "walk"])
def test_toy_bundle_parity(toy_bundle: tuple[Path, Manifest], policy: str,
                           global_random_seed: int) -> None:
    path, manifest = toy_bundle
    X = np.random.default_rng(global_random_seed).normal(scale=2.0, size=(400, 3))
    sources = assert_parity(path, manifest, policy, X.astype(np.float32))
    assert sources == {"local", "cloud"}


def test_dataset_bundle_parity(tmp_path: Path) -> None:
    from adaptedge.trainer.data.datasets import load_dataset

    manifest = build_dataset_bundle(tmp_path / "lb", "letter-binary")
    X = load_dataset("letter-binary").X_test[:300]
    assert_parity(tmp_path / "lb", manifest, "gate", X)


@pytest.mark.slow
def test_trained_bundle_parity(quick_bundle: Callable[[str], tuple[Path, Manifest]]) -> None:
    from adaptedge.trainer.data.datasets import load_dataset

    path, manifest = quick_bundle("adapt-gbrt")  # trained once per run (tests/conftest.py)
    X = load_dataset("letter-binary").X_test[:400]
    points = manifest.operating_points
    for point in (points[0], points[len(points) // 2], points[-1]):
        sources = assert_parity(path, manifest, point.policy, X)
        assert "local" in sources
