"""The export's validation walks (every policy on threads) equal each policy walked alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptedge.protocol import Manifest
from adaptedge.trainer.policy.oracle import BundleRunner
from adaptedge.trainer.validation_reference import validation_walks


def test_threaded_walks_equal_single_walks(toy_bundle: tuple[Path, Manifest]) -> None:
    bundle, manifest = toy_bundle
    files = {name: (bundle / name).read_bytes() for name in manifest.files}
    X = np.random.default_rng(3).normal(size=(3000, 3)).astype(np.float32)
    walks = validation_walks(manifest, files, X)
    policies = {p.policy for p in manifest.operating_points}
    assert set(walks.results) == policies and len(policies) > 1
    alone = BundleRunner.from_files(manifest, files)
    assert (walks.hpc_labels == alone.hpc_proba(X).argmax(axis=1)).all()
    for name in policies:
        want, got = alone.evaluate(name, X), walks.results[name]
        assert got.escalated.any() and not got.escalated.all()
        for field in ("labels", "probabilities", "escalated", "sensors_read", "cost"):
            assert getattr(got, field).tobytes() == getattr(want, field).tobytes(), field
