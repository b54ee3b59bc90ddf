"""A replay session verifies once, shares its sessions and the HPC's answers across replays and
gives the decisions a fresh replay of the bundle directory gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.protocol import Manifest
from adaptedge.protocol.errors import BundleError
from adaptedge.simulator.network import NetworkConfig, Outage
from adaptedge.simulator.replay import hpc_answers, replay
from adaptedge.simulator.replay_session import ReplaySession
from adaptedge.simulator.scenario import DevicesConfig, Scenario

COLUMNS = ("device", "row", "t_start", "latency_ms", "label", "source", "escalated", "sent",
           "sensors", "request_id", "energy_mj")
IMPAIRED = Scenario(seed=5, devices=DevicesConfig(count=2, rate_hz=50),
                    network=NetworkConfig(rtt_ms=120, jitter=0.8, loss=0.1,
                                          outages=(Outage(2.0, 1.0),)))


def _data(n: int) -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(7).normal(size=(n, 3)).astype(np.float32)
    return X, (X[:, 0] + X[:, 2] > 0).astype(np.int64)


@pytest.mark.parametrize("batched", [True, False])
def test_a_session_replays_as_the_directory_does(toy_bundle: tuple[Path, Manifest],
                                                 tmp_path: Path, batched: bool) -> None:
    bundle, _ = toy_bundle
    X, y = _data(300)
    session = ReplaySession(bundle, cache_dir=tmp_path / "cache")
    for point in ("gate", "walk", "gate"):
        want = replay(bundle, X, y, scenario=IMPAIRED, operating_point=point, batched=batched)
        got = replay(session, X, y, scenario=IMPAIRED, operating_point=point, batched=batched)
        assert "cloud" in set(got.columns.source)
        for col in COLUMNS:
            assert list(getattr(got.columns, col)) == list(getattr(want.columns, col)), col
        assert got.duration_s == want.duration_s
    assert (hpc_answers(session, X) == hpc_answers(bundle, X)).all()


def test_the_hpc_is_asked_once_per_row(toy_bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    bundle, _ = toy_bundle
    X, y = _data(400)
    session = ReplaySession(bundle, cache_dir=tmp_path / "cache")
    first = replay(session, X, y, operating_point="gate")
    asked = session.answers.computed
    assert asked == int(np.sum(first.columns.escalated))
    replay(session, X, y, operating_point="gate")
    assert session.answers.computed == asked
    hpc_answers(session, X)  # every row: only those not escalated before are new
    assert session.answers.computed == len(X)
    fresh = ReplaySession(bundle, cache_dir=tmp_path / "cache")
    again = replay(fresh, X, y, operating_point="walk")
    assert fresh.answers.computed == 0  # all from the disk tables
    no_disk = ReplaySession(bundle, disk_cache=False)
    assert list(replay(no_disk, X, y, operating_point="walk").columns.label) == list(
        again.columns.label)
    assert no_disk.answers.computed == int(np.sum(again.columns.escalated))


def test_a_file_changed_after_the_session_verified_is_refused(
        toy_bundle: tuple[Path, Manifest], tmp_path: Path) -> None:
    bundle, manifest = toy_bundle
    session = ReplaySession(bundle, disk_cache=False)
    (bundle / manifest.hpc.file).write_bytes(b"changed")
    X, y = _data(50)
    with pytest.raises(BundleError, match="SHA-256"):
        replay(session, X, y, operating_point="gate")
