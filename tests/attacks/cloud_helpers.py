"""Support for the cloud attack tests: a served toy bundle, request bytes, hostile HPC models."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from adaptedge.cloud.transport.client import RequestClient
from adaptedge.protocol import InferenceRequest, Manifest, encode, pack_features, write_bundle
from adaptedge.protocol.manifest import MODEL_INPUT, PROBA_OUTPUT
from tests.support.toy_bundle import build_toy_bundle

IR_VERSION, OPSET = 8, 17


def request(manifest: Manifest, rid: int, values: Sequence[float], device: str = "dev1", *,
            sent_at: float | None = None, deadline_ms: float = 60_000.0) -> InferenceRequest:
    feats, mask = pack_features(list(values), [True] * len(values))
    return InferenceRequest(rid, device, manifest.bundle_id,
                            time.time() if sent_at is None else sent_at, deadline_ms, feats, mask)


def device(url: str, name: str = "dev1") -> RequestClient:
    client = RequestClient(url, name)
    client.connect()
    return client


def send(client: RequestClient, message: InferenceRequest) -> None:
    client.send(encode(message))


def bundle_with_hpc(out: Path, tmp: Path, hpc: bytes) -> tuple[Path, Manifest]:
    """The toy bundle with its HPC replaced by ``hpc`` (hashes and id recomputed)."""
    toy = tmp / "toy-source"
    manifest = build_toy_bundle(toy)
    files: dict[str, bytes | Path] = {name: toy / name for name in manifest.files}
    files[manifest.hpc.file] = hpc
    return out, write_bundle(out, dataclasses.replace(manifest, bundle_id="pending"), files)


def _probabilities_tail(value_input: str) -> tuple[list[helper.NodeProto], list[TensorProto]]:
    """Nodes turning a scalar float ``value_input`` into [N, 2] 'probabilities' (0.5, 0.5)."""
    nodes = [
        helper.make_node("Mul", [value_input, "zero_f"], ["nothing"]),
        helper.make_node("Add", ["half", "nothing"], ["p"]),
        helper.make_node("Shape", [MODEL_INPUT], ["shape_x"]),
        helper.make_node("Slice", ["shape_x", "i0", "i1"], ["n"]),
        helper.make_node("Concat", ["n", "i2"], ["out_shape"], axis=0),
        helper.make_node("Expand", ["p", "out_shape"], [PROBA_OUTPUT]),
    ]
    inits = [
        helper.make_tensor("zero_f", TensorProto.FLOAT, [], [0.0]),
        helper.make_tensor("half", TensorProto.FLOAT, [1, 2], [0.5, 0.5]),
        helper.make_tensor("i0", TensorProto.INT64, [1], [0]),
        helper.make_tensor("i1", TensorProto.INT64, [1], [1]),
        helper.make_tensor("i2", TensorProto.INT64, [1], [2]),
    ]
    return nodes, inits


def _model(nodes: list[helper.NodeProto], inits: list[TensorProto]) -> bytes:
    graph = helper.make_graph(
        nodes, "hostile", [helper.make_tensor_value_info(MODEL_INPUT, TensorProto.FLOAT,
                                                         ["N", 3])],
        [helper.make_tensor_value_info(PROBA_OUTPUT, TensorProto.FLOAT, ["N", 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model.SerializeToString()  # type: ignore[no-any-return]


def loop_model(trip_count: int | None) -> bytes:
    """A Loop counting to ``trip_count`` (``None``: to the batch's largest feature value)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "one"], ["acc_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [])],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    if trip_count is None:
        nodes = [helper.make_node("ReduceMax", [MODEL_INPUT], ["largest"], keepdims=0),
                 helper.make_node("Cast", ["largest"], ["trips"], to=TensorProto.INT64)]
        inits = []
    else:
        nodes, inits = [], [helper.make_tensor("trips", TensorProto.INT64, [], [trip_count])]
    nodes.append(helper.make_node("Loop", ["trips", "go", "start"], ["count"], body=body))
    tail, tail_inits = _probabilities_tail("count")
    inits += [helper.make_tensor("go", TensorProto.BOOL, [], [True]),
              helper.make_tensor("start", TensorProto.FLOAT, [], [0.0]), *tail_inits]
    return _model(nodes + tail, inits)


def balloon_model() -> bytes:
    """ConstantOfShape of ``largest feature value`` float32s: 2e8 asks for 800 MB."""
    nodes = [
        helper.make_node("ReduceMax", [MODEL_INPUT], ["largest"], keepdims=0),
        helper.make_node("Cast", ["largest"], ["size"], to=TensorProto.INT64),
        helper.make_node("Reshape", ["size", "i1"], ["shape"]),
        helper.make_node("ConstantOfShape", ["shape"], ["big"],
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
        helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
    ]
    tail, inits = _probabilities_tail("total")
    return _model(nodes + tail, inits)


def probabilities(reply: object) -> np.ndarray:
    return reply.probability_array()  # type: ignore[attr-defined,no-any-return]
