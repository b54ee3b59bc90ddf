"""Quick letter-binary bundles, trained once per session for the slow C export tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from adaptedge.protocol import Manifest


@pytest.fixture(scope="session")
def quick_bundle(tmp_path_factory: pytest.TempPathFactory
                 ) -> Callable[[str], tuple[Path, Manifest]]:
    """``method`` -> (path, manifest) of ``train_bundle("letter-binary", method, quick=True)``."""
    built: dict[str, tuple[Path, Manifest]] = {}

    def get(method: str) -> tuple[Path, Manifest]:
        if method not in built:
            from adaptedge.trainer.api import train_bundle

            path = tmp_path_factory.mktemp(f"quick-{method}") / "bundle"
            built[method] = path, train_bundle("letter-binary", method, path, quick=True,
                                               progress=False)
        return built[method]

    return get
