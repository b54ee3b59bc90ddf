"""Regression end to end through a real mosquitto (issue #33): ``CloudService`` serving the
toy regression bundle and an ``EdgeRuntime`` with an ``MqttUplink``: an escalated row's
``Decision.value`` is the HPC's value (float32); a misbehaving cloud (a test double, the
broker is real) publishing NaN, infinite, wrongly shaped or classification replies is
counted by the device and never answers: the node's own value does, flagged degraded."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import msgpack
import numpy as np
import pytest

from adaptedge.edge import EdgeRuntime
from adaptedge.edge.escalation import DEADLINE, MISMATCHED_REPLY
from adaptedge.edge.mqtt_uplink import MqttUplink
from adaptedge.protocol import InferenceReply, InferenceRequest, LinkSpec, encode
from adaptedge.protocol.messages import TYPE_VALUE, VALUE_SCHEMA_VERSION, kind
from adaptedge.simulator.brokers import MosquittoBroker
from tests.cloud.service.conftest import Served
from tests.support.edge_doubles import MqttResponder
from tests.support.toy_regression_bundle import (
    build_toy_regression_bundle,
    hpc_value,
    node_value,
)

pytestmark = pytest.mark.broker

ESCALATE_AT_A = [-1.0, -1.0, 4.0]
ESCALATE_AT_AB = [0.0, 2.0, -1.5]
STOP_AT_A = [2.0, 0.5, 9.0]


def test_escalations_get_the_hpc_value(served: Served, tmp_path: Path) -> None:
    # a generous deadline: the machine is shared, the answer's source is what is tested
    manifest = build_toy_regression_bundle(tmp_path / "b", link=LinkSpec(deadline_ms=5000.0))
    with served(tmp_path / "b") as (service, uplink), \
            EdgeRuntime.load(tmp_path / "b", uplink=uplink) as rt:
        for row in (ESCALATE_AT_A, ESCALATE_AT_AB):
            d = rt.predict_row(row)
            assert (d.source, d.error, d.escalated) == ("cloud", None, True)
            assert d.value == hpc_value(row)  # the float32 the HPC computed
            assert d.value == np.float32(d.value)
            assert d.bundle_id == manifest.bundle_id and d.label == ""
        d = rt.predict_row(STOP_AT_A)
        assert (d.source, d.value) == ("local", np.float32(node_value("a.onnx", STOP_AT_A[:2])))
        counters = rt.counters
        assert counters["decisions_cloud"] == 2 and counters["mismatched_replies"] == 0
    assert service.inference.answered >= 2


def _raw_value(value: object) -> Callable[[InferenceRequest], bytes]:
    def payload(r: InferenceRequest) -> bytes:
        return bytes(msgpack.packb([kind(TYPE_VALUE, VALUE_SCHEMA_VERSION), r.request_id,
                                    r.device, r.bundle_id, value, "bad-hpc", 0.0, 0.0]))
    return payload


def _classification(r: InferenceRequest) -> bytes:
    return encode(InferenceReply(r.request_id, r.device, r.bundle_id, 0,
                                 np.array([0.5, 0.5], "<f4").tobytes(), "bad-hpc", 0.0, 0.0))


MALFORMED: dict[str, tuple[Callable[[InferenceRequest], bytes], str, str]] = {
    # name: (payload, the device counter that counts it, the decision's error)
    "nan": (_raw_value(math.nan), "bad_replies", DEADLINE),
    "inf": (_raw_value(math.inf), "bad_replies", DEADLINE),
    "wrong-shape": (_raw_value([1.0, 2.0]), "bad_replies", DEADLINE),
    "classification-reply": (_classification, "mismatched_replies", MISMATCHED_REPLY),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_replies_are_counted_never_used(broker: MosquittoBroker, tmp_path: Path,
                                                  name: str) -> None:
    payload, counter, error = MALFORMED[name]
    build_toy_regression_bundle(tmp_path / "b", link=LinkSpec(deadline_ms=800.0))
    responder = MqttResponder(broker.url, None, payload=payload)
    responder.wait_subscribed()
    try:
        with MqttUplink(broker.url, "dev1") as uplink:
            assert uplink.wait_connected(5.0)
            time.sleep(0.2)
            with EdgeRuntime.load(tmp_path / "b", uplink=uplink) as rt:
                d = rt.predict_row(ESCALATE_AT_A)
                own = np.float32(node_value("a.onnx", ESCALATE_AT_A[:2]))
                assert (d.source, d.error, d.value) == ("degraded", error, own)
                deadline = time.monotonic() + 5.0  # a late bad reply is counted on arrival
                while rt.counters[counter] < 1 and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert rt.counters[counter] == 1
                assert rt.counters["decisions_degraded"] == 1
    finally:
        responder.close()
    assert responder.answered == 1
