"""Where adaptedge keeps what it can rebuild: HPC fits and the demo's bundles and reports."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import numpy as np


def cache_root() -> Path:
    """``$ADAPTEDGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/adaptedge``, else ``~/.cache/adaptedge``."""
    explicit = os.environ.get("ADAPTEDGE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "adaptedge"


CACHE_PARTS: dict[str, str] = {
    "hpc": "HPC fits (trainer.hpc; rebuilt by the next train)",
    "demo": "adaptedge demo's bundles, runs and reports",
    "replay": "the HPC's answers to replayed rows (simulator.hpc_cache; recomputed on demand)",
}
"""The cache's subdirectories and what they hold; ``adaptedge cache clear`` removes only these."""


class _Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


def hash_arrays(digest: _Digest, arrays: Iterable[Any]) -> None:
    """Feed each array's dtype, shape and bytes to ``digest`` (a ``hashlib`` hash): the arrays'
    part of a content key (the HPC cache's, the warm starts' memo)."""
    for arr in arrays:
        a = np.ascontiguousarray(arr)
        digest.update(f"{a.dtype}{a.shape}".encode())
        digest.update(a.tobytes())
