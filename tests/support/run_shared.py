"""Things built once per test run and shared by every pytest-xdist worker (``make test`` runs
the suite on several): a folder under the run's temporary root, built by the first worker that
asks for it while the others wait on a lock file beside it.

Without xdist the run's root is pytest's base temporary folder; under xdist each worker has its
own base folder (``.../pytest-N/popen-gw0``) and the run's root is their common parent.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def run_root(factory: pytest.TempPathFactory) -> Path:
    """The temporary folder every worker of this run shares (never outside pytest's)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_folder(factory: pytest.TempPathFactory, name: str,
                  build: Callable[[Path], object]) -> Path:
    """``run_root/name``, made by ``build(folder)`` once per run (a folder that a failed
    build left half-made is removed and built again by the next worker that asks)."""
    root = run_root(factory)
    folder, done = root / name, root / f"{name}.done"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            build(folder)
            done.touch()
    return folder
