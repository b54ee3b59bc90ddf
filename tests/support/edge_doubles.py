"""Test helpers for the edge runtime: an independent reference walk and in-process uplinks."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from adaptedge.protocol.costs import CostBreakdown, decision_cost
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.messages import ErrorReply, InferenceReply, InferenceRequest


class ReferenceWalk:
    """The policy rules written plainly with ``InferenceSession.run`` (no edge code)."""

    def __init__(self, bundle: Path, manifest: Manifest) -> None:
        self.manifest = manifest
        self.sessions = {name: ort.InferenceSession(str(bundle / name),
                                                    providers=["CPUExecutionProvider"])
                         for name in manifest.files}

    def run(self, name: str, cols: tuple[int, ...],
            row: npt.NDArray[np.float32]) -> list[npt.NDArray[np.float32]]:
        """[probabilities, action_scores (when the model has them)] for one row."""
        x = row[list(cols)].reshape(1, -1).astype(np.float32)
        session = self.sessions[name]
        present = {o.name for o in session.get_outputs()}
        wanted = [n for n in ("probabilities", "action_scores") if n in present]
        return [np.asarray(o)[0] for o in session.run(wanted, {"x": x})]

    def walk(self, policy: str, row: npt.NDArray[np.float32]) -> dict[str, object]:
        graph = self.manifest.policies[policy]
        node_id = graph.root
        read: list[str] = []
        nodes: list[str] = []
        while True:
            node = graph.nodes[node_id]
            read += [s for s in node.sensors if s not in read]
            nodes.append(node_id)
            outputs = self.run(node.model.file, node.model.inputs, row)
            action = node.actions[0] if len(node.actions) == 1 else \
                node.actions[int(np.argmax(outputs[1]))]
            if action.kind == "acquire":
                assert action.next is not None
                node_id = action.next
                continue
            escalated = action.kind == "escalate"
            if escalated:
                read += [s for s in self.manifest.hpc.sensors if s not in read]
            return {"label_index": int(np.argmax(outputs[0])), "nodes": tuple(nodes),
                    "sensors_read": tuple(read), "escalated": escalated,
                    "probabilities": outputs[0]}

    def hpc(self, row: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        cols = tuple(range(len(self.manifest.feature_names)))
        return self.run(self.manifest.hpc.file, cols, row)[0]

    def cost(self, sensors: tuple[str, ...], escalated: bool) -> CostBreakdown:
        return decision_cost(self.manifest, sensors, escalated)


class HpcUplink:
    """An in-process uplink answering with the bundle's HPC (or a scripted behaviour)."""

    def __init__(self, reference: ReferenceWalk, *, connected: bool = True,
                 behaviour: Callable[[InferenceRequest], InferenceReply | ErrorReply | None]
                 | None = None) -> None:
        self.reference = reference
        self.connected = connected
        self.behaviour = behaviour
        self.requests: list[InferenceRequest] = []

    def is_connected(self) -> bool:
        return self.connected

    def exchange(self, request: InferenceRequest,
                 deadline: float) -> InferenceReply | ErrorReply | None:
        self.requests.append(request)
        if self.behaviour is not None:
            return self.behaviour(request)
        return hpc_reply(self.reference, request)


def hpc_reply(reference: ReferenceWalk, request: InferenceRequest) -> InferenceReply:
    proba = reference.hpc(request.feature_array() * request.mask_array())
    return InferenceReply(request.request_id, request.device, request.bundle_id,
                          int(np.argmax(proba)), proba.astype("<f4").tobytes(), "hpc",
                          time.time(), 0.1)


class MqttResponder:
    """A tiny cloud for edge tests: a paho client answering every request with the HPC.

    ``copies`` > 1 sends duplicate replies; ``delay_s`` answers late (from a timer thread).
    """

    def __init__(self, broker_url: str, reference: ReferenceWalk, *, copies: int = 1,
                 delay_s: float = 0.0) -> None:
        import socket
        import threading
        from urllib.parse import urlsplit

        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        from adaptedge.protocol.codec import decode, encode
        from adaptedge.protocol.topics import reply_topic, wildcard

        self.reference = reference
        self.copies = copies
        self.delay_s = delay_s
        self.answered = 0
        self._timers: list[threading.Timer] = []
        url = urlsplit(broker_url)
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="edge-test-responder",
                             protocol=mqtt.MQTTv311, clean_session=True)

        def on_socket_open(c: mqtt.Client, userdata: object, sock: Any) -> None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def on_connect(c: mqtt.Client, *args: object) -> None:
            c.subscribe(wildcard("req"), qos=1)

        def on_message(c: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
            request = decode(message.payload)
            assert isinstance(request, InferenceRequest)
            data = encode(hpc_reply(self.reference, request))
            topic = reply_topic(request.device)

            def send() -> None:
                for _ in range(self.copies):
                    c.publish(topic, data, qos=1)
                self.answered += 1

            if self.delay_s > 0:
                timer = threading.Timer(self.delay_s, send)
                timer.daemon = True
                self._timers.append(timer)
                timer.start()
            else:
                send()

        client.on_socket_open = on_socket_open
        client.on_connect = on_connect
        client.on_message = on_message
        client.reconnect_delay_set(1, 2)
        client.connect_async(url.hostname or "127.0.0.1", url.port or 1883)
        client.loop_start()
        self.client = client

    def wait_subscribed(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.client.is_connected() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.client.is_connected(), "the test responder could not connect"
        time.sleep(0.1)  # let the SUBSCRIBE reach the broker

    def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self.client.disconnect()
        self.client.loop_stop()


def build_dataset_bundle(out: Path, dataset: str, *, seed: int = 0) -> Manifest:
    """A one-node gate bundle (stop/escalate) over every sensor of a built-in dataset, with
    least-squares linear models, so replay tests have a bundle whose features match the data."""
    from toy_bundle import linear_model_bytes

    from adaptedge.protocol import (
        Action,
        HpcRef,
        ModelRef,
        OperatingPoint,
        PolicyGraph,
        PolicyNode,
        write_bundle,
    )
    from adaptedge.trainer.datasets import load_dataset

    data = load_dataset(dataset)
    n, k = data.n_features, data.n_classes
    X = np.c_[data.X_train, np.ones(len(data.X_train))]
    onehot = np.eye(k)[data.y_train]
    coef = np.linalg.lstsq(X, onehot * 4 - 2, rcond=None)[0].astype(np.float32)
    rng = np.random.default_rng(seed)
    gate_w = rng.normal(size=(n, 2)).astype(np.float32) * 0.1
    files = {"hpc.onnx": linear_model_bytes(coef[:-1], coef[-1]),
             "gate.onnx": linear_model_bytes(coef[:-1] * 0.5, coef[-1] * 0.5, gate_w,
                                             np.zeros(2, np.float32))}
    sensors = tuple(s.name for s in data.sensors)
    graph = PolicyGraph(root="all", nodes={"all": PolicyNode(
        sensors=sensors, model=ModelRef("gate.onnx", tuple(range(n))),
        actions=(Action("stop"), Action("escalate")))})
    manifest = Manifest(
        schema_version=1, bundle_id="pending", classes=data.classes,
        feature_names=data.feature_names, sensors=data.sensors, link=data.link,
        cost_weights=data.cost_weights,
        hpc=HpcRef("hpc.onnx", sensors, accuracy=0.7, description="least-squares linear"),
        policies={"gate": graph},
        operating_points=(OperatingPoint("gate", "gate", accuracy=0.6, cost=float(n)),),
        default_operating_point="gate", files={}, metadata={"method": "test", "dataset": dataset})
    return write_bundle(out, manifest, files)
