"""Model calls split into row chunks on several threads give one call's outputs bit for bit, and
the batched replay on them still makes the per-row replay's decisions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.protocol.bundle import verify
from adaptedge.protocol.manifest import ACTION_OUTPUT
from adaptedge.simulator.batch_replay import BundleModels
from adaptedge.simulator.replay import replay
from adaptedge.simulator.replay_session import ReplaySession
from adaptedge.simulator.row_chunks import CHUNKS_PER_THREAD, chunk_bounds, usable_threads
from tests.simulator.test_batch_replay import COLUMNS, SCENARIOS
from tests.support.dataset_bundle import build_dataset_bundle


@pytest.mark.parametrize("n,threads,rows", [(0, 2, 4), (10, 1, 2), (7, 4, 4), (8, 4, 4),
                                            (1000, 2, 100), (1001, 3, 7), (50, 8, 1)])
def test_chunks_cover_every_row_once(n: int, threads: int, rows: int) -> None:
    bounds = chunk_bounds(n, threads, rows)
    assert bounds[0] == 0 and bounds[-1] == n
    sizes = np.diff(bounds)
    assert (sizes > 0).all() or n == 0
    if len(sizes) > 1:
        assert len(sizes) <= threads * CHUNKS_PER_THREAD and sizes.min() >= rows
    if threads == 1 or n < 2 * rows:
        assert len(sizes) == 1


def test_usable_threads_is_positive() -> None:
    assert usable_threads() >= 1


def test_chunked_calls_equal_one_call(tmp_path: Path) -> None:
    from adaptedge.trainer.data.datasets import load_dataset

    manifest = build_dataset_bundle(tmp_path / "b", "heart", escalate=0.4)
    X = np.ascontiguousarray(np.tile(load_dataset("heart").split("test")[0], (5, 1)),
                             dtype=np.float32)
    one = BundleModels(verify(tmp_path / "b"), tmp_path / "b", threads=1)
    many = BundleModels(verify(tmp_path / "b"), tmp_path / "b", threads=3, chunk_rows=13)
    node = next(iter(manifest.policies["gate"].nodes.values()))
    x = np.ascontiguousarray(X[:, list(node.model.inputs)])
    for file, scores in ((node.model.file, ACTION_OUTPUT), (manifest.hpc.file, None)):
        rows = x if scores else X
        want, got = one.run(file, rows, scores), many.run(file, rows, scores)
        assert got[0].tobytes() == want[0].tobytes()
        assert (got[1] is None) == (want[1] is None) == (not scores)
        if scores:
            assert got[1] is not None and want[1] is not None
            assert got[1].tobytes() == want[1].tobytes()


def test_chunked_replay_makes_the_per_row_decisions(tmp_path: Path) -> None:
    from adaptedge.trainer.data.datasets import load_dataset

    manifest = build_dataset_bundle(tmp_path / "b", "heart", escalate=0.4)
    X, y = load_dataset("heart").split("test")
    session = ReplaySession(tmp_path / "b", disk_cache=False, threads=3)
    session.models.chunk_rows = 11  # many chunks on a small split
    for name in ("impaired", "sparse"):
        point, scenario = manifest.default_operating_point, SCENARIOS[name]
        fast = replay(session, X, y, scenario=scenario, operating_point=point)
        slow = replay(session, X, y, scenario=scenario, operating_point=point, batched=False)
        for col in COLUMNS:
            assert list(getattr(fast.columns, col)) == list(getattr(slow.columns, col)), col
        assert fast.duration_s == slow.duration_s
