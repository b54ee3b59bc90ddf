"""The edge runtime's walk against a plain reference walk, operating points, costs, counters."""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from adaptedge.edge import Decision, EdgeError, EdgeRuntime, Outbox
from adaptedge.edge.errors import OperatingPointError
from adaptedge.protocol import Manifest
from adaptedge.protocol.messages import ErrorReply, InferenceRequest
from tests.support.edge_doubles import HpcUplink
from tests.support.reference_walk import ReferenceWalk

Bundle = tuple[Path, Manifest]


def rows(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=2.0, size=(n, 3)).astype(np.float32)


@pytest.mark.parametrize("policy", ["gate", "walk"])
def test_walk_matches_reference_walk(toy_bundle: Bundle, policy: str,
                                     global_random_seed: int) -> None:
    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    rt = EdgeRuntime.load(path, operating_point=policy, uplink=HpcUplink(ref))
    kinds = set()
    for row in rows(300, global_random_seed):
        expected = ref.walk(policy, row)
        d = rt.predict_row(row)
        assert d.nodes == expected["nodes"]
        assert d.sensors_read == expected["sensors_read"]
        assert d.escalated == expected["escalated"]
        assert d.cost == ref.cost(d.sensors_read, d.escalated)
        if d.escalated:
            assert d.source == "cloud"
            assert d.label_index == int(np.argmax(ref.hpc(row)))
            assert d.request_id is not None
        else:
            assert d.source == "local"
            assert d.label_index == expected["label_index"]
            np.testing.assert_allclose(d.probabilities,
                                       np.asarray(expected["probabilities"]), rtol=1e-6)
        assert d.label == manifest.classes[d.label_index]
        kinds.add((d.nodes, d.escalated))
    assert len(kinds) >= 2, "the rows should exercise more than one path"


def test_predict_reads_only_what_the_policy_asks_in_order(toy_bundle: Bundle) -> None:
    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    rt = EdgeRuntime.load(path, operating_point="walk")
    for row in rows(100, 1):
        calls: list[str] = []

        def reader(name: str, cols: tuple[int, ...], row: np.ndarray = row,
                   calls: list[str] = calls) -> Callable[[], np.ndarray]:
            def read() -> np.ndarray:
                calls.append(name)
                return row[list(cols)]
            return read

        sensors = {s.name: reader(s.name, s.features) for s in manifest.sensors}
        d = rt.predict(sensors)
        assert tuple(calls) == d.sensors_read
        assert d.sensors_read == ref.walk("walk", row)["sensors_read"]
        replay = rt.predict_row(row)
        assert (d.label_index, d.nodes, d.source) == (replay.label_index, replay.nodes,
                                                      replay.source)


def test_reader_objects_with_read_method(toy_bundle: Bundle) -> None:
    path, _ = toy_bundle

    class Sensor:
        def __init__(self, values: list[float]) -> None:
            self.values = values

        def read(self) -> list[float]:
            return self.values

    rt = EdgeRuntime.load(path, operating_point="gate")
    d = rt.predict({"a": Sensor([0.5, -1.0]), "b": Sensor([2.0])})
    assert d.failed_sensors == {}
    assert d.label_index == rt.predict_row([0.5, -1.0, 2.0]).label_index


def test_uplink_outcomes(toy_bundle: Bundle) -> None:
    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    # Find rows the gate escalates.
    probe = EdgeRuntime.load(path, operating_point="gate")
    escalated = [r for r in rows(200, 2) if probe.predict_row(r).escalated][:5]
    assert escalated

    def error(req: InferenceRequest) -> ErrorReply:
        return ErrorReply(req.request_id, req.device, "unknown_bundle", "no such bundle", 0.0)

    cases = {
        "down": (HpcUplink(ref, connected=False), "degraded", "uplink_down"),
        "timeout": (HpcUplink(ref, behaviour=lambda req: None), "degraded", "deadline"),
        "error": (HpcUplink(ref, behaviour=error), "degraded", "unknown_bundle"),
        "wrong id": (HpcUplink(ref, behaviour=lambda req: _with_id(ref, req, req.request_id + 1)),
                     "degraded", "mismatched_reply"),
        "ok": (HpcUplink(ref), "cloud", None),
    }
    for name, (uplink, source, error_code) in cases.items():
        rt = EdgeRuntime.load(path, operating_point="gate", uplink=uplink, device_id="d1")
        for row in escalated:
            d = rt.predict_row(row)
            local = ref.walk("gate", row)
            assert (d.source, d.error) == (source, error_code), name
            assert d.escalated
            if source == "degraded":
                assert d.label_index == local["label_index"]
            # A request is only sent (and the link only paid) when the uplink is up.
            sent = name != "down"
            assert (d.request_id is not None) == sent
            assert d.cost == ref.cost(d.sensors_read, sent)
        if name == "down":
            assert uplink.requests == []
        else:
            req = uplink.requests[0]
            assert req.device == "d1" and req.bundle_id == manifest.bundle_id
            assert req.deadline_ms == manifest.link.deadline_ms
            assert req.mask_array().all()
            np.testing.assert_array_equal(req.feature_array(), escalated[0])
        counters = rt.counters
        assert counters["escalations"] == len(escalated)
        assert counters[f"decisions_{source}"] == len(escalated)
        # Each way an escalation ends is counted once, under one counter.
        faults = sum(counters[k] for k in ("uplink_down", "deadline_missed", "cloud_errors",
                                           "mismatched_replies", "uplink_errors"))
        assert faults == (len(escalated) if source == "degraded" else 0), name


def _with_id(ref: ReferenceWalk, req: InferenceRequest, rid: int):  # type: ignore[no-untyped-def]
    from tests.support.edge_doubles import hpc_reply

    reply = hpc_reply(ref, req)
    reply.request_id = rid
    return reply


def test_request_ids_increase_and_can_be_fixed(toy_bundle: Bundle) -> None:
    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    uplink = HpcUplink(ref)
    rt = EdgeRuntime.load(path, operating_point="gate", uplink=uplink, request_id_start=7)
    ids = [d.request_id for d in map(rt.predict_row, rows(100, 3)) if d.escalated]
    assert ids and ids == list(range(7, 7 + len(ids)))


def test_counters_add_up(toy_bundle: Bundle) -> None:
    path, _ = toy_bundle
    rt = EdgeRuntime.load(path)
    decisions: list[Decision] = [rt.predict_row(r) for r in rows(150, 4)]
    c = rt.counters
    assert c["decisions"] == 150
    for source in ("local", "cloud", "degraded"):
        assert c[f"decisions_{source}"] == sum(d.source == source for d in decisions)
    assert c["escalations"] == sum(d.escalated for d in decisions)
    assert c["energy_mj"] == pytest.approx(sum(d.cost.energy_mj for d in decisions))
    assert c["cost"] == pytest.approx(sum(d.cost.scalar for d in decisions))
    assert c["escalation_rate"] == pytest.approx(c["escalations"] / 150)


def test_operating_points_by_name_and_budget(toy_bundle: Bundle) -> None:
    path, manifest = toy_bundle
    rt = EdgeRuntime.load(path)
    assert rt.operating_point == manifest.default_operating_point == "walk"
    rt.set_operating_point("gate")
    assert rt.operating_point == "gate"
    assert rt.predict_row([0.0, 0.0, 0.0]).nodes == ("ab",)
    # Budgets: walk costs 8 (accuracy .85), gate 12 (accuracy .8).
    rt.set_operating_point(100.0)
    assert rt.operating_point == "walk"
    rt.set_operating_point(8.0)
    assert rt.operating_point == "walk"
    with pytest.raises(OperatingPointError, match="cheapest is 'walk'"):
        rt.set_operating_point(7.9)
    with pytest.raises(OperatingPointError, match="no operating point 'fast'"):
        rt.set_operating_point("fast")
    assert EdgeRuntime.load(path, operating_point="gate").operating_point == "gate"


def test_row_of_wrong_length_is_refused(toy_bundle: Bundle) -> None:
    rt = EdgeRuntime.load(toy_bundle[0])
    with pytest.raises(EdgeError, match="a row has 2 values; this bundle takes 3 features"):
        rt.predict_row([1.0, 2.0])


def test_tar_bundle_is_accepted(toy_bundle: Bundle, tmp_path: Path) -> None:
    path, _ = toy_bundle
    archive = tmp_path / "toy.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(path, arcname="toy")
    row = rows(1, 5)[0]
    with EdgeRuntime.load(archive) as from_tar:
        assert (from_tar.predict_row(row).label_index
                == EdgeRuntime.load(path).predict_row(row).label_index)
        from_tar.set_operating_point("gate")  # loads models from the extracted copy
        assert from_tar.predict_row(row).nodes == ("ab",)


def test_outbox_records_escalations_within_limits(toy_bundle: Bundle, tmp_path: Path) -> None:
    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    outbox = Outbox(tmp_path / "outbox", max_files=3)
    rt = EdgeRuntime.load(path, operating_point="gate", uplink=HpcUplink(ref), outbox=outbox)
    decisions = [rt.predict_row(r) for r in rows(100, 6)]
    sent = [d.request_id for d in decisions if d.request_id is not None]
    assert len(sent) > 3
    assert len(outbox) == 3 == len(list((tmp_path / "outbox").iterdir()))
    assert [r.request_id for r in outbox.requests()] == sent[-3:]
    small = Outbox(tmp_path / "outbox", max_bytes=1)  # reopening applies the new limits
    assert len(small) == 0 and small.total_bytes == 0


def test_ties_take_the_first_highest_action(tmp_path: Path) -> None:
    from adaptedge.protocol import (
        Action,
        CostWeights,
        HpcRef,
        LinkSpec,
        ModelRef,
        OperatingPoint,
        PolicyGraph,
        PolicyNode,
        SensorSpec,
        write_bundle,
    )
    from tests.support.toy_bundle import linear_model_bytes

    w = np.ones((1, 2), np.float32)
    tie = linear_model_bytes(w, np.zeros(2, np.float32), np.zeros((1, 3), np.float32),
                             np.array([0.5, 0.5, 0.5], np.float32))
    graph = PolicyGraph(root="n", nodes={"n": PolicyNode(
        ("s",), ModelRef("n.onnx", (0,)),
        (Action("escalate"), Action("stop"), Action("escalate")))})
    manifest = Manifest(
        schema_version=1, bundle_id="pending", classes=("x", "y"), feature_names=("f",),
        sensors=(SensorSpec("s", (0,)),), link=LinkSpec(), cost_weights=CostWeights(),
        hpc=HpcRef("n.onnx", ("s",), accuracy=0.5), policies={"p": graph},
        operating_points=(OperatingPoint("p", "p", accuracy=0.5, cost=1.0),),
        default_operating_point="p", files={})
    write_bundle(tmp_path / "tie", manifest, {"n.onnx": tie})
    rt = EdgeRuntime.load(tmp_path / "tie")
    d = rt.predict_row([1.0])
    assert d.escalated and d.source == "degraded"
    assert d.label_index == 0  # probabilities tie too: the first class


def test_outbox_drops_old_records(toy_bundle: Bundle, tmp_path: Path) -> None:
    import time

    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    probe = EdgeRuntime.load(path, operating_point="gate")
    escalated = [r for r in rows(200, 8) if probe.predict_row(r).escalated][:4]
    outbox = Outbox(tmp_path / "outbox", max_age_s=1.0)
    rt = EdgeRuntime.load(path, operating_point="gate", uplink=HpcUplink(ref), outbox=outbox)
    for row in escalated:
        rt.predict_row(row)
    assert len(outbox) == len(escalated) == 4
    time.sleep(1.1)
    rt.predict_row(escalated[0])
    assert len(outbox) == 1


def test_an_uplink_that_raises_degrades(toy_bundle: Bundle) -> None:
    path, manifest = toy_bundle

    def boom(req: InferenceRequest) -> None:
        raise RuntimeError("transport bug")

    rt = EdgeRuntime.load(path, operating_point="gate",
                          uplink=HpcUplink(ReferenceWalk(path, manifest), behaviour=boom))
    escalated = [d for d in map(rt.predict_row, rows(50, 9)) if d.escalated]
    assert escalated and all((d.source, d.error) == ("degraded", "uplink_error")
                             for d in escalated)
    assert rt.counters["uplink_errors"] == len(escalated)
    assert rt.counters["cloud_errors"] == 0


def test_a_device_bundle_decides_as_its_full_bundle(toy_bundle: Bundle, tmp_path: Path,
                                                     global_random_seed: int) -> None:
    from adaptedge.protocol.device_bundle import write_device_bundle

    path, manifest = toy_bundle
    device = write_device_bundle(path, manifest, tmp_path / "dev", ["walk"])
    ref = ReferenceWalk(path, manifest)
    full = EdgeRuntime.load(path, operating_point="walk", uplink=HpcUplink(ref))
    dev = EdgeRuntime.load(tmp_path / "dev", uplink=HpcUplink(ref))
    assert dev.manifest.bundle_id == device.bundle_id and dev.operating_point == "walk"
    for row in rows(200, global_random_seed):
        a, b = full.predict_row(row), dev.predict_row(row)
        assert (a.label, a.nodes, a.sensors_read, a.escalated, a.cost) == \
            (b.label, b.nodes, b.sensors_read, b.escalated, b.cost)
    with pytest.raises(OperatingPointError, match="gate"):
        dev.set_operating_point("gate")  # not kept
