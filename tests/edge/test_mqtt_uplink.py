"""The MQTT uplink against a real mosquitto: cloud answers, outages degrade within the deadline,
recovery without restarting the runtime, late and duplicate replies counted and dropped."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaptedge.edge import EdgeRuntime, MqttUplink
from adaptedge.edge.errors import UplinkConfigError
from adaptedge.protocol import Manifest
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.edge_doubles import MqttResponder
from tests.support.reference_walk import ReferenceWalk

pytestmark = pytest.mark.broker
Bundle = tuple[Path, Manifest]


def escalated_rows(path: Path, n: int) -> list[np.ndarray]:
    probe = EdgeRuntime.load(path, operating_point="gate")
    rng = np.random.default_rng(3)
    rows = [r for r in rng.normal(scale=2.0, size=(500, 3)).astype(np.float32)
            if probe.predict_row(r).escalated]
    assert len(rows) >= n
    return rows[:n]


@pytest.fixture()
def uplink(mosquitto: MosquittoBroker) -> Iterator[MqttUplink]:
    link = MqttUplink(mosquitto.url, "dev1", reconnect_min_s=0.05, reconnect_max_s=0.5).start()
    try:
        assert link.wait_connected(10.0), link.last_error
        yield link
    finally:
        link.close()


def test_outage_degrades_within_deadline_and_recovers(toy_bundle: Bundle,
                                                      mosquitto: MosquittoBroker,
                                                      uplink: MqttUplink) -> None:
    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    responder = MqttResponder(mosquitto.url, ref)
    responder.wait_subscribed()
    rt = EdgeRuntime.load(path, operating_point="gate", uplink=uplink, device_id="dev1")
    rows = escalated_rows(path, 10)
    deadline_s = manifest.link.deadline_ms / 1000
    try:
        # Up: the cloud answers, with the HPC's label.
        for row in rows:
            d = rt.predict_row(row)
            assert d.source == "cloud", d.error
            assert d.label_index == int(np.argmax(ref.hpc(row)))
        # Down: every decision is degraded, none waits longer than its deadline.
        mosquitto.stop()
        waits = []
        for row in rows:
            started = time.monotonic()
            d = rt.predict_row(row)
            waits.append(time.monotonic() - started)
            assert d.source == "degraded" and d.error in ("uplink_down", "deadline")
            assert d.label_index == ref.walk("gate", row)["label_index"]
        print(f"broker down: {len(waits)} decisions degraded, longest wait {max(waits):.4f} s "
              f"(deadline {deadline_s:.3f} s)")
        assert max(waits) <= deadline_s + 0.05, f"waited {max(waits):.3f} s"
        # Back on the same port: answers resume without restarting the runtime.
        mosquitto.start()
        recovered = False
        give_up = time.monotonic() + 20.0
        while time.monotonic() < give_up and not recovered:
            recovered = rt.predict_row(rows[0]).source == "cloud"
            if not recovered:
                time.sleep(0.05)
        assert recovered, f"no cloud answer after the broker came back ({uplink.last_error})"
        print(f"cloud answers resumed {time.monotonic() - give_up + 20.0:.2f} s after restart")
        assert all(rt.predict_row(r).source == "cloud" for r in rows)
        assert uplink.counters["connects"] >= 2
    finally:
        responder.close()


def test_duplicate_replies_are_counted_and_dropped(toy_bundle: Bundle,
                                                   mosquitto: MosquittoBroker,
                                                   uplink: MqttUplink) -> None:
    path, manifest = toy_bundle
    responder = MqttResponder(mosquitto.url, ReferenceWalk(path, manifest), copies=3)
    responder.wait_subscribed()
    rt = EdgeRuntime.load(path, operating_point="gate", uplink=uplink, device_id="dev1")
    try:
        rows = escalated_rows(path, 5)
        assert all(rt.predict_row(r).source == "cloud" for r in rows)
        give_up = time.monotonic() + 5.0
        while rt.counters["duplicate_replies"] < 10 and time.monotonic() < give_up:
            time.sleep(0.02)
        assert rt.counters["duplicate_replies"] == 10
        assert rt.counters["decisions_cloud"] == 5
    finally:
        responder.close()


def test_late_replies_are_counted_and_dropped(toy_bundle: Bundle, mosquitto: MosquittoBroker,
                                              uplink: MqttUplink) -> None:
    path, manifest = toy_bundle
    late = manifest.link.deadline_ms / 1000 + 0.1
    responder = MqttResponder(mosquitto.url, ReferenceWalk(path, manifest), delay_s=late)
    responder.wait_subscribed()
    rt = EdgeRuntime.load(path, operating_point="gate", uplink=uplink, device_id="dev1")
    try:
        for row in escalated_rows(path, 3):
            d = rt.predict_row(row)
            assert (d.source, d.error) == ("degraded", "deadline")
            assert d.timings["cloud"] >= manifest.link.deadline_ms / 1000 - 0.005
        give_up = time.monotonic() + 5.0
        while rt.counters["late_replies"] < 3 and time.monotonic() < give_up:
            time.sleep(0.02)
        assert rt.counters["late_replies"] == 3
        assert rt.counters["deadline_missed"] == 3
    finally:
        responder.close()


def test_socket_has_tcp_nodelay(uplink: MqttUplink) -> None:
    sock: Any = uplink._client.socket()
    assert isinstance(sock, socket.socket)
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_telemetry_is_published(mosquitto: MosquittoBroker, uplink: MqttUplink) -> None:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from adaptedge.protocol.codec import decode
    from adaptedge.protocol.messages import Telemetry

    got: list[Telemetry] = []
    listener = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="telemetry-listener")
    listener.on_connect = lambda c, *a: c.subscribe(uplink.telemetry_topic, qos=0)
    listener.on_message = lambda c, u, m: got.append(decode(m.payload))  # type: ignore[arg-type]
    listener.connect(mosquitto.host, mosquitto.port)
    listener.loop_start()
    try:
        give_up = time.monotonic() + 5.0
        while not got and time.monotonic() < give_up:
            uplink.publish_telemetry({"decisions": 3.0})
            time.sleep(0.1)
        assert got and got[0].source == "dev1" and got[0].counters == {"decisions": 3.0}
    finally:
        listener.disconnect()
        listener.loop_stop()


def test_bad_options_are_refused() -> None:
    with pytest.raises(UplinkConfigError, match="not mqtt://HOST"):
        MqttUplink("http://x", "dev1")
    with pytest.raises(UplinkConfigError, match="without a username"):
        MqttUplink("mqtt://127.0.0.1:1", "dev1", password="p")


def test_unreachable_broker_degrades_at_once(toy_bundle: Bundle) -> None:
    from adaptedge.simulator.brokers import free_port

    path, _ = toy_bundle
    link = MqttUplink(f"mqtt://127.0.0.1:{free_port()}", "dev1").start()
    try:
        rt = EdgeRuntime.load(path, operating_point="gate", uplink=link)
        row = escalated_rows(path, 1)[0]
        started = time.monotonic()
        d = rt.predict_row(row)
        assert time.monotonic() - started < 0.05
        assert (d.source, d.error, d.request_id) == ("degraded", "uplink_down", None)
        time.sleep(0.2)
        assert link.counters["connect_failures"] >= 1 and link.last_error
    finally:
        link.close()


def test_frozen_broker_degrades_at_the_deadline(toy_bundle: Bundle, mosquitto: MosquittoBroker,
                                                uplink: MqttUplink) -> None:
    path, manifest = toy_bundle
    responder = MqttResponder(mosquitto.url, ReferenceWalk(path, manifest))
    responder.wait_subscribed()
    rt = EdgeRuntime.load(path, operating_point="gate", uplink=uplink, device_id="dev1")
    deadline_s = manifest.link.deadline_ms / 1000
    rows = escalated_rows(path, 4)
    try:
        assert rt.predict_row(rows[0]).source == "cloud"
        mosquitto.pause()  # connections stay open, nothing is answered
        waits = []
        for row in rows:
            started = time.monotonic()
            d = rt.predict_row(row)
            waits.append(time.monotonic() - started)
            assert (d.source, d.error) == ("degraded", "deadline")
        print(f"broker frozen: longest wait {max(waits):.4f} s (deadline {deadline_s:.3f} s)")
        assert deadline_s - 0.005 <= min(waits) and max(waits) <= deadline_s + 0.05
        mosquitto.resume()
        give_up = time.monotonic() + 10.0
        while rt.predict_row(rows[0]).source != "cloud" and time.monotonic() < give_up:
            time.sleep(0.05)
        assert rt.predict_row(rows[0]).source == "cloud"
    finally:
        mosquitto.resume()
        responder.close()


def test_username_and_password(tmp_path: Path, toy_bundle: Bundle) -> None:
    import shutil
    import subprocess

    tool = shutil.which("mosquitto_passwd")
    if tool is None:
        pytest.skip("mosquitto_passwd is not installed")
    passwords = tmp_path / "passwd"
    subprocess.run([tool, "-b", "-c", str(passwords), "dev1", "s3cret"], check=True,
                   capture_output=True, timeout=30)
    with MosquittoBroker(password_file=passwords) as broker:
        good = MqttUplink(broker.url, "dev1", username="dev1", password="s3cret").start()
        bad = MqttUplink(broker.url, "dev1", username="dev1", password="wrong",
                         client_id="dev1-bad").start()
        try:
            assert good.wait_connected(10.0), good.last_error
            give_up = time.monotonic() + 10.0
            while bad.counters["connect_failures"] < 1 and time.monotonic() < give_up:
                time.sleep(0.02)
            assert not bad.is_connected()
            assert bad.last_error is not None and "refused" in bad.last_error
            rt = EdgeRuntime.load(toy_bundle[0], operating_point="gate", uplink=bad)
            d = rt.predict_row(escalated_rows(toy_bundle[0], 1)[0])
            assert (d.source, d.error) == ("degraded", "uplink_down")
        finally:
            good.close()
            bad.close()


def test_with_the_real_cloud_service(toy_bundle: Bundle, mosquitto: MosquittoBroker,
                                     uplink: MqttUplink) -> None:
    from adaptedge.cloud.service.worker import CloudService

    path, manifest = toy_bundle
    ref = ReferenceWalk(path, manifest)
    service = CloudService(path, mosquitto.url, max_wait_ms=1.0)
    service.start()
    try:
        rt = EdgeRuntime.load(path, operating_point="gate", uplink=uplink, device_id="dev1")
        rows = escalated_rows(path, 8)
        give_up = time.monotonic() + 10.0
        while rt.predict_row(rows[0]).source != "cloud" and time.monotonic() < give_up:
            time.sleep(0.05)
        for row in rows:
            d = rt.predict_row(row)
            assert d.source == "cloud", d.error
            assert d.label_index == int(np.argmax(ref.hpc(row)))
            np.testing.assert_allclose(d.probabilities, ref.hpc(row), rtol=1e-5)
    finally:
        service.stop()


def test_embedded_amqtt_broker(toy_bundle: Bundle) -> None:
    pytest.importorskip("amqtt")
    from adaptedge.simulator.brokers import AmqttBroker

    path, manifest = toy_bundle
    with AmqttBroker() as broker:
        responder = MqttResponder(broker.url, ReferenceWalk(path, manifest))
        link = MqttUplink(broker.url, "dev1").start()
        try:
            responder.wait_subscribed()
            assert link.wait_connected(10.0), link.last_error
            rt = EdgeRuntime.load(path, operating_point="gate", uplink=link, device_id="dev1")
            rows = escalated_rows(path, 5)
            give_up = time.monotonic() + 10.0
            while rt.predict_row(rows[0]).source != "cloud" and time.monotonic() < give_up:
                time.sleep(0.05)
            assert all(rt.predict_row(r).source == "cloud" for r in rows)
        finally:
            link.close()
            responder.close()


def test_tls_with_a_private_ca(tmp_path: Path, toy_bundle: Bundle) -> None:
    import shutil
    import ssl
    import subprocess

    tool = shutil.which("openssl")
    if tool is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([tool, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)

    class TlsMosquitto(MosquittoBroker):
        def config_text(self) -> str:
            return super().config_text() + (f"cafile {cert}\ncertfile {cert}\nkeyfile {key}\n")

    with TlsMosquitto() as broker:
        trusted = ssl.create_default_context(cafile=str(cert))
        link = MqttUplink(f"mqtts://127.0.0.1:{broker.port}", "dev1", tls=trusted).start()
        untrusted = MqttUplink(f"mqtts://127.0.0.1:{broker.port}", "dev2").start()
        try:
            assert link.wait_connected(10.0), link.last_error
            give_up = time.monotonic() + 10.0
            while untrusted.last_error is None and time.monotonic() < give_up:
                time.sleep(0.02)
            assert not untrusted.is_connected()
            assert untrusted.last_error is not None and "CERTIFICATE" in untrusted.last_error
        finally:
            link.close()
            untrusted.close()
