"""The exported C library decides as the edge runtime does: every decision (kind, label,
sensors read and their order, nodes visited, escalation request, cost) on the host with gcc,
against ``EdgeRuntime.predict_row`` (no uplink, and an uplink answering from the HPC)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from adaptedge.protocol import Manifest
from adaptedge.trainer.export.c import export_c
from tests.support.c_policy import build_host, gcc_available, mismatches, run_host
from tests.support.dataset_bundle import build_dataset_bundle

pytestmark = pytest.mark.skipif(not gcc_available(), reason="gcc is not installed")


def with_failures(X: np.ndarray, seed: int, share: float = 0.1) -> np.ndarray:
    """``X`` with NaN in ``share`` of its cells: those sensors' reads fail."""
    out = np.array(X, dtype=np.float32)
    out[np.random.default_rng(seed).random(out.shape) < share] = np.nan
    return out


_LIBRARIES: dict[Path, ctypes.CDLL] = {}
"""Compiled libraries by output folder (a test's ``tmp_path``, so never shared across tests)."""


def assert_same(bundle: Path, manifest: Manifest, point: str, X: np.ndarray,
                tmp_path: Path) -> np.ndarray:
    """Export ``point``, compile it, and check every row with the link down and up; returns
    the decision kinds (link down)."""
    out = tmp_path / f"c-{point}"
    lib = _LIBRARIES.get(out)
    if lib is None:  # a test's second call for the same point reuses the compiled library
        export_c(bundle, out, point)
        lib = _LIBRARIES[out] = build_host(out, out)
    kinds = np.zeros(0)
    for link_up in (False, True):
        records = run_host(lib, X, len(manifest.sensors), len(manifest.classes), link_up)
        bad = mismatches(bundle, point, X, records, link_up)
        assert not bad, f"{len(bad)} of {len(X)} rows differ (link up: {link_up}): {bad[0]}"
        if not link_up:
            kinds = records.kind
    return kinds


@pytest.mark.parametrize("policy", ["gate", "walk"])
def test_toy_policies_with_failing_sensors(toy_bundle: tuple[Path, Manifest], policy: str,
                                           tmp_path: Path) -> None:
    path, manifest = toy_bundle
    point = next(p.name for p in manifest.operating_points if p.policy == policy)
    X = np.random.default_rng(0).normal(scale=2.0, size=(600, len(manifest.feature_names)))
    kinds = assert_same(path, manifest, point, with_failures(X, 1, 0.15), tmp_path)
    assert set(kinds.tolist()) >= {0, 1}  # stops and escalations both occur


@pytest.mark.slow
def test_linear_dataset_bundle(tmp_path: Path) -> None:
    from adaptedge.trainer.data.datasets import load_dataset

    manifest = build_dataset_bundle(tmp_path / "lb", "letter-binary")
    X = load_dataset("letter-binary").X_test[:500]
    assert_same(tmp_path / "lb", manifest, "gate", X, tmp_path)
    assert_same(tmp_path / "lb", manifest, "gate", with_failures(X, 2, 0.02), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["adapt-gbrt", "dag"])
def test_quick_letter_binary_whole_test_split(
        method: str, quick_bundle: Callable[[str], tuple[Path, Manifest]],
        tmp_path: Path) -> None:
    """The acceptance check on the host: the quick letter-binary bundles' default points on
    every test row, and on 400 of them with a tenth of the reads failing."""
    from adaptedge.trainer.data.datasets import load_dataset

    path, manifest = quick_bundle(method)
    X = load_dataset("letter-binary").X_test
    point = manifest.default_operating_point
    assert_same(path, manifest, point, X, tmp_path)
    assert_same(path, manifest, point, with_failures(X[:400], 3), tmp_path)
