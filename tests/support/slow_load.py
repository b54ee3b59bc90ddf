"""A bundle whose HPC takes seconds to load, as a large model does: the real load, delayed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from adaptedge.cloud.service.inference import HpcInference


def slow_load(monkeypatch: pytest.MonkeyPatch, bundle: Path, seconds: float) -> list[float]:
    """Make every ``HpcInference.load`` of ``bundle`` take ``seconds`` longer (then load it for
    real); returns the list the monotonic start time of each such load is appended to."""
    real = HpcInference.load
    started: list[float] = []

    def load(bundle_dir: Any, **kwargs: Any) -> HpcInference:
        if Path(bundle_dir).resolve() == bundle.resolve():
            started.append(time.monotonic())
            time.sleep(seconds)
        return real(bundle_dir, **kwargs)

    monkeypatch.setattr(HpcInference, "load", staticmethod(load))
    return started
