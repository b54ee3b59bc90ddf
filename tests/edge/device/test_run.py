from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from adaptedge.edge import MqttUplink
from adaptedge.edge.device import DeviceOptions, ReplayRows, RunLog, run_device, start_runtime
from adaptedge.edge.journal import DecisionJournal, read_journal, summarize
from adaptedge.protocol import Manifest
from adaptedge.protocol.codec import decode
from adaptedge.protocol.messages import Telemetry
from adaptedge.protocol.topics import wildcard
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.edge_doubles import MqttResponder
from tests.support.reference_walk import ReferenceWalk

Letter = tuple[Path, Manifest, ReplayRows]


def test_an_offline_run_journals_every_line_and_its_summary(letter: Letter,
                                                             tmp_path: Path) -> None:
    bundle, _, rows = letter
    options = DeviceOptions(bundle, device="dev2")
    path = tmp_path / "run.jsonl"
    log = RunLog(DecisionJournal(path, fsync_every_s=0.0))
    rt = start_runtime(options, None, rows, print)
    run = run_device(rt, None, rows, options, log, threading.Event(), print)
    log.close()
    lines = read_journal(path)
    assert lines == log.lines
    kinds = [line["kind"] for line in lines]
    assert kinds == ["start", *["decision"] * len(rows), "counters", "summary"]
    assert lines[0]["device"] == "dev2" and lines[0]["rows"] == len(rows)
    assert lines[-1] == {"kind": "summary", **run.summary}
    assert run.summary == {**summarize(lines[:-1]), "interrupted": False}
    assert run.summary["decisions"] == len(rows) == run.counters["decisions"]


def test_a_stopped_run_is_summarised_as_interrupted(letter: Letter) -> None:
    bundle, _, rows = letter
    options = DeviceOptions(bundle)
    stop = threading.Event()
    stop.set()
    log = RunLog()
    run = run_device(start_runtime(options, None, rows, print), None, rows, options, log, stop,
                     print)
    assert run.summary["interrupted"] is True and run.summary["decisions"] == 0
    assert [line["kind"] for line in log.lines] == ["start", "counters", "summary"]


class TelemetryListener:
    """A paho client keeping every telemetry message published on the broker."""

    def __init__(self, broker: MosquittoBroker) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.received: list[Telemetry] = []
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="device-run-listener")
        self.client.on_connect = lambda c, *a: c.subscribe(wildcard("telemetry"), qos=1)

        def on_message(c: Any, u: Any, message: Any) -> None:
            msg = decode(message.payload)
            if isinstance(msg, Telemetry):
                self.received.append(msg)

        self.client.on_message = on_message
        self.client.connect("127.0.0.1", broker.port)
        self.client.loop_start()
        deadline = time.monotonic() + 10
        while not self.client.is_connected() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # let the SUBSCRIBE reach the broker

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.mark.broker
def test_a_run_escalates_drains_and_reports_over_a_real_broker(
        letter: Letter, tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    bundle, manifest, rows = letter
    responder = MqttResponder(mosquitto.url, ReferenceWalk(bundle, manifest))
    responder.wait_subscribed()
    listener = TelemetryListener(mosquitto)
    options = DeviceOptions(bundle, device="dev5", outbox=tmp_path / "outbox",
                            telemetry_every_s=0.01, drain_wait_s=0.0)
    try:
        uplink = MqttUplink(mosquitto.url, "dev5")
        rt = start_runtime(options, uplink, rows, print)
        run = run_device(rt, uplink, rows, options, RunLog(), threading.Event(), print)
        deadline = time.monotonic() + 5
        while not listener.received and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        listener.close()
        responder.close()
    assert run.summary["by_source"]["cloud"] > 0 and run.summary["by_source"]["degraded"] == 0
    assert "outbox_records" in run.counters and "drain_in_flight" in run.counters  # the drain's
    assert listener.received and all(t.source == "dev5" for t in listener.received)
    assert {"decisions", "latency_p50_ms", "latency_p99_ms"} <= set(listener.received[-1].counters)


@pytest.mark.slow
def test_the_device_run_loads_no_trainer_cloud_simulator_or_heavy_library(
        letter: Letter, tmp_path: Path) -> None:
    bundle, _, rows = letter
    code = (
        "import sys, threading, numpy as np\n"
        "from pathlib import Path\n"
        "from adaptedge.edge.device import DeviceOptions, ReplayRows, RunLog, run_device, "
        "start_runtime\n"
        f"options = DeviceOptions(Path({str(bundle)!r}))\n"
        f"X = np.zeros((3, {rows.X.shape[1]}), np.float32)\n"
        f"rows = ReplayRows(X, ['x'] * 3, {list(rows.feature_names)!r})\n"
        "rt = start_runtime(options, None, rows, print)\n"
        "run_device(rt, None, rows, options, RunLog(), threading.Event(), print)\n"
        "ours = {'.'.join(m.split('.')[:2]) for m in sys.modules if m.startswith('adaptedge.')}\n"
        "heavy = {m.split('.')[0] for m in sys.modules} & {'sklearn', 'scipy', 'skl2onnx', "
        "'onnx', 'matplotlib', 'sqlalchemy', 'dask'}\n"
        "print(sorted(ours | heavy))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "['adaptedge.edge', 'adaptedge.protocol']"


def test_a_swap_mid_run_is_journaled_and_named_in_the_summary(letter: Letter,
                                                              tmp_path: Path) -> None:
    """After an over-the-air swap the summary names the bundle and point that answered last,
    counts each bundle's decisions, and a ``swap`` line marks the row where it happened."""
    import shutil

    from adaptedge.edge import EdgeRuntime
    from adaptedge.edge.switchable import Probation, SwitchableRuntime
    from adaptedge.protocol.bundle_version import stamp_version

    bundle, manifest, rows = letter
    newer = tmp_path / "v2"
    shutil.copytree(bundle, newer)
    v2 = stamp_version(newer, 2)
    options = DeviceOptions(bundle, device="dev3", rate_hz=50.0)  # 0.8 s: the swap lands inside
    holder = SwitchableRuntime(start_runtime(options, None, rows, print), 1)  # type: ignore[arg-type]
    said: list[str] = []
    swapped = threading.Timer(0.05, lambda: holder.swap(EdgeRuntime.load(newer), 2,
                                                        Probation(decisions=0)))
    swapped.start()
    try:
        log = RunLog()
        run = run_device(holder, None, rows, options, log, threading.Event(), said.append)
    finally:
        swapped.cancel()
    swaps = [line for line in log.lines if line["kind"] == "swap"]
    assert len(swaps) == 1 and swaps[0]["to"] == v2.bundle_id
    answered = run.summary["answered_by"]
    assert [a["bundle_id"] for a in answered] == [manifest.bundle_id, v2.bundle_id]
    assert sum(a["decisions"] for a in answered) == len(rows)
    assert run.summary["bundle_id"] == v2.bundle_id
    assert run.summary["operating_point"] == v2.default_operating_point
    assert any(s.startswith(f"bundle {v2.bundle_id} answers from row") for s in said)
