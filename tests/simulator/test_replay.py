"""Replay: the real runtime + HpcInference on a simulated clock and network."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from adaptedge.edge import EdgeRuntime
from adaptedge.protocol import Manifest
from adaptedge.simulator.energy import EnergyModel
from adaptedge.simulator.network import NetworkConfig, Outage
from adaptedge.simulator.replay import hpc_answers, replay
from adaptedge.simulator.scenario import DevicesConfig, Scenario


def _data(n: int, seed: int = 0) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    return X, (X[:, 0] + X[:, 2] > 0).astype(np.int64)


IMPAIRED = Scenario(seed=5, devices=DevicesConfig(count=2, rate_hz=50),
                    network=NetworkConfig(rtt_ms=120, jitter=0.8, loss=0.1,
                                          outages=(Outage(2.0, 1.0),)))


@pytest.mark.parametrize("point", ["gate", "walk"])
def test_replay_is_deterministic_for_a_seed(toy_bundle: tuple[Path, Manifest], point: str) -> None:
    bundle, _ = toy_bundle
    X, y = _data(400)
    a = replay(bundle, X, y, scenario=IMPAIRED, operating_point=point)
    b = replay(bundle, X, y, scenario=IMPAIRED, operating_point=point)
    assert a.n == b.n == 800
    assert a.columns == b.columns
    assert set(a.columns.source) >= {"local", "degraded"}
    other = replay(bundle, X, y, scenario=Scenario(seed=6, devices=IMPAIRED.devices,
                                                   network=IMPAIRED.network),
                   operating_point=point)
    assert list(other.columns.latency_ms) != list(a.columns.latency_ms)


def test_every_row_gets_one_answer_and_outages_degrade(toy_bundle: tuple[Path, Manifest]) -> None:
    bundle, _ = toy_bundle
    X, y = _data(300)
    run = replay(bundle, X, y, scenario=IMPAIRED, operating_point="gate")
    keys = list(zip(run.columns.device, run.columns.row, strict=True))
    assert len(keys) == len(set(keys)) == 2 * 300
    t = np.asarray(run.columns.t_start)
    src = run.sources()
    esc = np.asarray(run.columns.escalated)
    inside = (t >= 2.0) & (t < 3.0)
    assert inside.any()
    assert not (src[inside & esc] == "cloud").any()  # nothing reaches the cloud when down
    assert (src[inside & esc] == "degraded").all()
    assert (src[~inside & esc] == "cloud").mean() > 0.5


def test_replay_matches_the_runtime_and_the_hpc(toy_bundle: tuple[Path, Manifest]) -> None:
    """Ideal network: local answers are the runtime's own, cloud answers are the HPC's,
    and the energy of each decision equals the runtime's Decision.cost."""
    bundle, manifest = toy_bundle
    X, y = _data(300, seed=3)
    run = replay(bundle, X, y, operating_point="walk")
    assert set(run.columns.source) <= {"local", "cloud"}
    local_only = EdgeRuntime.load(bundle, operating_point="walk")
    hpc = hpc_answers(bundle, X)
    energy = EnergyModel(manifest)
    for i in range(len(X)):
        d = local_only.predict_row(X[i])
        assert run.columns.escalated[i] == d.escalated
        if d.escalated:
            assert run.columns.source[i] == "cloud"
            assert run.columns.label[i] == hpc[i]
        else:
            assert run.columns.label[i] == d.label_index
            assert run.columns.sensors[i] == d.sensors_read
            cost = energy.cost(run.columns.sensors[i], run.columns.sent[i])
            assert cost.energy_mj == pytest.approx(d.cost.energy_mj)


def test_always_local_baseline_sends_nothing(toy_bundle: tuple[Path, Manifest]) -> None:
    bundle, _ = toy_bundle
    X, y = _data(200)
    run = replay(bundle, X, y, operating_point="gate", cloud=False)
    assert not any(run.columns.sent)
    assert set(run.columns.source) <= {"local", "degraded"}
    assert run.escalation_rate() > 0


def test_live_calls_give_the_same_answers_as_prefetch(toy_bundle: tuple[Path, Manifest]) -> None:
    bundle, _ = toy_bundle
    X, y = _data(300, seed=9)
    fast = replay(bundle, X, y, operating_point="gate", batched=False)
    slow = replay(bundle, X, y, operating_point="gate", prefetch=False, batched=False)
    assert fast.columns == slow.columns


@pytest.mark.parametrize("point", ["gate", "walk"])
def test_replay_agrees_with_an_independent_reference_walk(
        toy_bundle: tuple[Path, Manifest], point: str) -> None:
    """Labels, sources and sensors of every replayed decision against the plain onnxruntime
    walk of tests/support/reference_walk.py: no edge or cloud code."""
    from tests.support.reference_walk import ReferenceWalk

    bundle, manifest = toy_bundle
    X, y = _data(250, seed=11)
    run = replay(bundle, X, y, operating_point=point)
    ref = ReferenceWalk(bundle, manifest)
    policy = manifest.operating_point(point).policy
    for i in range(len(X)):
        want = ref.walk(policy, X[i])
        assert run.columns.label[i] == want["answer"]
        assert run.columns.source[i] == ("cloud" if want["escalated"] else "local")
        assert sorted(run.columns.sensors[i]) == sorted(want["sensors_read"])



@pytest.mark.parametrize("point", ["gate", "walk"])
def test_replay_agrees_with_trainer_policy_eval(toy_bundle: tuple[Path, Manifest],
                                                point: str) -> None:
    """Every decision (label, source, sensors read, energy) against the trainer's batched
    reference walk of the exported ONNX, ideal network."""
    from adaptedge.trainer.policy.oracle import evaluate_policy

    bundle, manifest = toy_bundle
    X, y = _data(500, seed=13)
    run = replay(bundle, X, y, operating_point=point)
    ref = evaluate_policy(bundle, manifest.operating_point(point).policy, X, y)
    assert list(run.columns.label) == ref.labels.tolist()
    assert list(run.columns.source) == ref.source.tolist()
    names = ref.sensor_names
    want_sensors = [sorted(names[j] for j in np.flatnonzero(row)) for row in ref.sensors_read]
    assert [sorted(s) for s in run.columns.sensors] == want_sensors
    assert np.allclose(run.columns.energy_mj, ref.energy_mj)
    assert run.accuracy() == pytest.approx(ref.accuracy)
