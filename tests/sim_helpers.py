"""Helpers for simulator tests: a small bundle for a built-in dataset (no trainer needed)."""

from __future__ import annotations

from pathlib import Path

from adaptedge.protocol import Manifest
from adaptedge.simulator.linear_bundle import build_linear_bundle


def build_dataset_bundle(out: Path, data: str, *, n_sensors: int = 4, escalate: float = 0.3,
                         seed: int = 0) -> Manifest:
    return build_linear_bundle(out, data, n_sensors=n_sensors, escalate=escalate, seed=seed)
