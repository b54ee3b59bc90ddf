"""The edge runtime on a regression bundle (issue #33): a decision answers a value (the stop
node's, the HPC's ``ValueReply`` when escalated, the node's own flagged ``degraded``
otherwise); a reply malformed for the task is counted and never becomes the value."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from adaptedge.edge import EdgeRuntime
from adaptedge.edge.device.records import decision_record
from adaptedge.edge.errors import BundleRefused
from adaptedge.edge.escalation import MISMATCHED_REPLY, NO_UPLINK
from adaptedge.edge.journal import summarize
from adaptedge.protocol import Manifest, write_bundle
from adaptedge.protocol.messages import (
    NO_LABEL,
    ErrorReply,
    InferenceReply,
    InferenceRequest,
    Reply,
    ValueReply,
)
from tests.support.toy_regression_bundle import (
    build_toy_regression_bundle,
    hpc_value,
    linear_value_model,
    node_value,
    toy_regression_files,
    toy_regression_manifest,
)

STOP_AT_A = [2.0, 0.5, 9.0]  # a: scores [2, 0.5, -3.5] -> stop
TO_AB_STOP = [0.0, 2.0, 1.5]  # a acquires b; ab: b0 >= 0 -> stop
ESCALATE_AT_A = [-1.0, -1.0, 4.0]  # a: scores [-1, -1, 1] -> escalate
ESCALATE_AT_AB = [0.0, 2.0, -1.5]  # a acquires b; ab: b0 < 0 -> escalate


class ScriptedUplink:
    """An in-process uplink: ``answer(request)`` is the cloud's reply (None: no reply)."""

    def __init__(self, answer: Callable[[InferenceRequest], Reply | None]) -> None:
        self.answer = answer
        self.requests: list[InferenceRequest] = []

    def is_connected(self) -> bool:
        return True

    def exchange(self, request: InferenceRequest, deadline: float) -> Reply | None:
        self.requests.append(request)
        return self.answer(request)


def hpc_answer(request: InferenceRequest) -> ValueReply:
    x = request.feature_array() * request.mask_array()
    return ValueReply(request.request_id, request.device, request.bundle_id, hpc_value(x),
                      "hpc", time.time(), 0.1)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    out = tmp_path_factory.mktemp("regedge") / "b"
    return out, build_toy_regression_bundle(out)


def test_local_stops_answer_the_node_value(bundle: tuple[Path, Manifest]) -> None:
    with EdgeRuntime.load(bundle[0]) as rt:
        d = rt.predict_row(STOP_AT_A)
        assert (d.source, d.nodes, d.escalated) == ("local", ("a",), False)
        assert d.value == np.float32(node_value("a.onnx", STOP_AT_A[:2]))
        assert (d.label, d.label_index, d.probabilities.shape) == ("", -1, (0,))
        d = rt.predict_row(TO_AB_STOP)
        assert (d.source, d.nodes) == ("local", ("a", "ab"))
        assert d.value == pytest.approx(node_value("ab.onnx", TO_AB_STOP), rel=1e-6)
        assert d.sensors_read == ("a", "b")
        record = decision_record(0, d, "1.5", 0.0)
        assert record["value"] == d.value and record["correct"] is None
        assert record["abs_error"] == pytest.approx(abs(d.value - 1.5))
        assert decision_record(0, d, "warm", 0.0)["abs_error"] is None


@pytest.mark.parametrize("row", [ESCALATE_AT_A, ESCALATE_AT_AB])
def test_escalation_answers_the_hpc_value(bundle: tuple[Path, Manifest], row: list[float]
                                          ) -> None:
    uplink = ScriptedUplink(hpc_answer)
    with EdgeRuntime.load(bundle[0], uplink=uplink) as rt:
        d = rt.predict_row(row)
        assert (d.source, d.escalated, d.error) == ("cloud", True, None)
        assert d.value == hpc_value(row)  # the HPC reads a and b: the full row
        assert (d.label, d.label_index, d.probabilities.size) == ("", -1, 0)
        request = uplink.requests[-1]
        assert (request.local_label, request.local_confidence) == (NO_LABEL, 0.0)
        assert rt.counters["decisions_cloud"] == 1


def _value(v: float) -> Callable[[InferenceRequest], Reply]:
    def answer(r: InferenceRequest) -> Reply:
        return ValueReply(r.request_id, r.device, r.bundle_id, v, "hpc", 0.0, 0.0)
    return answer


def _classification(r: InferenceRequest) -> Reply:
    return InferenceReply(r.request_id, r.device, r.bundle_id, 0,
                          np.array([1.0], "<f4").tobytes(), "hpc", 0.0, 0.0)


def _other_request(r: InferenceRequest) -> Reply:
    return ValueReply(r.request_id + 1, r.device, r.bundle_id, 1.0, "hpc", 0.0, 0.0)


def _text_value(r: InferenceRequest) -> Reply:
    return ValueReply(r.request_id, r.device, r.bundle_id, "3.0", "hpc", 0.0, 0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("answer", [_value(math.nan), _value(math.inf), _value(-math.inf),
                                    _classification, _other_request, _text_value],
                         ids=["nan", "inf", "-inf", "classification-reply", "other-request",
                              "text"])
def test_malformed_reply_is_counted_never_used(bundle: tuple[Path, Manifest],
                                               answer: Callable[[InferenceRequest], Reply]
                                               ) -> None:
    with EdgeRuntime.load(bundle[0], uplink=ScriptedUplink(answer)) as rt:
        d = rt.predict_row(ESCALATE_AT_A)
        own = np.float32(node_value("a.onnx", ESCALATE_AT_A[:2]))
        assert (d.source, d.error, d.value) == ("degraded", MISMATCHED_REPLY, own)
        assert d.value is not None and math.isfinite(d.value)
        counters = rt.counters
        assert counters["mismatched_replies"] == 1 and counters["decisions_degraded"] == 1


def test_error_reply_and_no_uplink_answer_the_node_value(bundle: tuple[Path, Manifest]
                                                         ) -> None:
    def error(r: InferenceRequest) -> Reply:
        return ErrorReply(r.request_id, r.device, "model_failed", "HPC value is NaN", 0.0)

    own = np.float32(node_value("a.onnx", ESCALATE_AT_A[:2]))
    with EdgeRuntime.load(bundle[0], uplink=ScriptedUplink(error)) as rt:
        d = rt.predict_row(ESCALATE_AT_A)
        assert (d.source, d.error, d.value) == ("degraded", "model_failed", own)
    with EdgeRuntime.load(bundle[0]) as rt:
        d = rt.predict_row(ESCALATE_AT_A)
        assert (d.source, d.error, d.value) == ("degraded", NO_UPLINK, own)


def test_value_reply_to_a_classification_bundle_is_mismatched(
        toy_bundle: tuple[Path, Manifest]) -> None:
    with EdgeRuntime.load(toy_bundle[0], operating_point="gate",
                          uplink=ScriptedUplink(_value(1.0))) as rt:
        for _ in range(50):
            d = rt.predict_row(np.random.default_rng(_).normal(size=3))
            if d.escalated:
                assert (d.source, d.error, d.value) == ("degraded", MISMATCHED_REPLY, None)
                assert d.label in toy_bundle[1].classes
                break
        else:
            pytest.fail("no row escalated")


def test_node_without_value_output_is_refused(tmp_path: Path) -> None:
    files = toy_regression_files()
    files["ab.onnx"] = linear_value_model([0.5, 1.0, -2.0], 0.0, [[0, 0], [0, 0], [1, -1]],
                                          [0.0, 0.0], output="probabilities")
    write_bundle(tmp_path / "b", toy_regression_manifest(), files)
    with pytest.raises(BundleRefused, match=r"lacks output.*value"):
        EdgeRuntime.load(tmp_path / "b", operating_point="gate")


def test_run_summary_reports_error_in_the_targets_units(bundle: tuple[Path, Manifest]) -> None:
    with EdgeRuntime.load(bundle[0]) as rt:
        d1, d2 = rt.predict_row(STOP_AT_A), rt.predict_row(TO_AB_STOP)
    assert d1.value is not None and d2.value is not None
    lines = [{"kind": "start", "device": "edge"},
             {"kind": "decision", **decision_record(0, d1, str(d1.value + 1.0), 0.1)},
             {"kind": "decision", **decision_record(1, d2, str(d2.value - 3.0), 0.2)},
             {"kind": "decision", **decision_record(2, d2, "n/a", 0.3)}]
    s = summarize(lines)
    assert s["scored"] == 2 and math.isnan(s["accuracy"])
    assert s["mae"] == pytest.approx(2.0) and s["mse"] == pytest.approx(5.0)
    plain = [{k: v for k, v in line.items() if k not in ("value", "abs_error")}
             for line in lines]
    assert "mse" not in summarize(plain)  # lines without values: a classification summary
