"""Two `adaptedge cloud serve` workers in one shared-subscription group; one is killed -9
mid-run. Every request gets exactly one final answer at the device (the cloud's, or its own
degraded one at the deadline); none is answered twice; the survivor takes the load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptedge.cloud.transport.client import RequestClient
from adaptedge.protocol import (
    ErrorReply,
    InferenceReply,
    InferenceRequest,
    Manifest,
    Telemetry,
    encode,
    pack_features,
)
from adaptedge.protocol.topics import wildcard
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.toy_bundle import build_toy_bundle

pytestmark = pytest.mark.broker
REPO = Path(__file__).resolve().parents[3]
N_REQUESTS = 600
RATE_PER_S = 300.0
DEADLINE_MS = 250.0
KILL_AFTER = 200
GRACE_S = 0.5


def start_worker(bundle: Path, url: str, name: str, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "adaptedge.cli.main", "cloud", "serve", "--bundle", str(bundle),
           "--broker", url, "--client-id", name, "--stats-every", "0.2"]
    with log.open("wb") as fh:
        return subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)


def wait_ready(proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if "ready" in log.read_text():
            return
        assert proc.poll() is None, f"worker exited early: {log.read_text()[-2000:]}"
        time.sleep(0.05)
    raise AssertionError(f"worker not ready in {timeout_s} s: {log.read_text()[-2000:]}")


@pytest.fixture()
def workers(tmp_path: Path) -> Iterator[tuple[Manifest, MosquittoBroker, dict[str, subprocess.Popen[bytes]], Path]]:
    manifest = build_toy_bundle(tmp_path / "toy")
    with MosquittoBroker() as broker:
        procs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for name in ("worker-a", "worker-b"):
                procs[name] = start_worker(tmp_path / "toy", broker.url, name,
                                           tmp_path / f"{name}.log")
            for name, proc in procs.items():
                wait_ready(proc, tmp_path / f"{name}.log")
            yield manifest, broker, procs, tmp_path
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                proc.wait(timeout=10)


@pytest.mark.slow
def test_kill_one_of_two_workers_mid_run(
        workers: tuple[Manifest, MosquittoBroker, dict[str, subprocess.Popen[bytes]], Path]) -> None:
    manifest, broker, procs, logs = workers
    dev = RequestClient(broker.url, "dev1")
    dev.connect()
    dev.subscribe(wildcard("telemetry"))
    served: dict[str, float] = {}
    # stats telemetry only: a worker's backlog probe travels on its telemetry topic too
    dev.on_reply = lambda msg, at: served.__setitem__(msg.source, msg.counters["received"]) \
        if isinstance(msg, Telemetry) and "received" in msg.counters else None
    feats, mask = pack_features([0.3, -1.2, 2.0], [True] * 3)
    sent_at: list[float] = []
    kill_at = 0.0
    start = time.perf_counter()
    for i in range(N_REQUESTS):
        if i == KILL_AFTER:
            assert dev.pump(3.0, lambda: len(served) == 2 and all(served.values()))
            served_before_kill = dict(served)
            os.kill(procs["worker-a"].pid, signal.SIGKILL)
            kill_at = time.perf_counter()
        dev.send(encode(InferenceRequest(i, "dev1", manifest.bundle_id, time.time(), DEADLINE_MS,
                                         feats, mask)))
        sent_at.append(time.perf_counter())
        dev.pump(max(0.0, start + (i + 1) / RATE_PER_S - time.perf_counter()))
    dev.pump(DEADLINE_MS / 1000 + 0.5)

    outcomes = {"cloud": 0, "degraded": 0}
    late_before_kill = 0  # the host's own lateness (a loaded CI machine), not the kill's
    for i, sent in enumerate(sent_at):
        replies = dev.replies.get(i, [])
        assert len(replies) <= 1, f"request {i} answered {len(replies)} times"
        on_time = bool(replies) and replies[0][0] - sent <= DEADLINE_MS / 1000
        # a worker behind its queue bound sheds at once (``overloaded``): the device answers
        # locally, as for a lost request; any other on-time reply is the inference
        shed = on_time and isinstance(replies[0][1], ErrorReply) \
            and replies[0][1].code == "overloaded"
        answered = on_time and not shed
        if answered:
            assert isinstance(replies[0][1], InferenceReply)
        outcomes["cloud" if answered else "degraded"] += 1
        late_before_kill += int(not answered and sent < kill_at)
        if sent > kill_at + GRACE_S:
            assert answered, f"request {i}, sent {sent - kill_at:.2f} s after the kill, degraded"
    assert sum(outcomes.values()) == N_REQUESTS
    # Only what worker-a held when it died may be lost: a handful, not a share of the load;
    # before the kill, at most 5% of the requests late on a loaded host (19 of 600 in all were
    # degraded once in a CI dry run under coverage beside the other worker's training tests).
    assert outcomes["degraded"] - late_before_kill <= 10, (outcomes, late_before_kill)
    assert late_before_kill <= KILL_AFTER // 20, (outcomes, late_before_kill)
    assert all(count > 0 for count in served_before_kill.values()), served_before_kill
    assert procs["worker-a"].wait(timeout=5) == -signal.SIGKILL

    # The survivor stops cleanly on SIGTERM.
    procs["worker-b"].send_signal(signal.SIGTERM)
    assert procs["worker-b"].wait(timeout=15) == 0
    assert "worker-b stopped" in (logs / "worker-b.log").read_text()
    assert "Client worker-b disconnected" in broker.log()
    dev.close()


@pytest.mark.slow
def test_kill_one_worker_under_the_edge_uplink(
        workers: tuple[Manifest, MosquittoBroker, dict[str, subprocess.Popen[bytes]], Path]) -> None:
    """The same, with the device side being the edge runtime's own MqttUplink."""
    from adaptedge.edge.mqtt_uplink import MqttUplink

    manifest, broker, procs, _ = workers
    spy = RequestClient(broker.url, "spy")
    spy.connect(subscribe=False)
    spy.subscribe(wildcard("telemetry"))
    served: dict[str, float] = {}
    spy.on_reply = lambda msg, at: served.__setitem__(msg.source, msg.counters["received"]) \
        if isinstance(msg, Telemetry) else None
    feats, mask = pack_features([0.3, -1.2, 2.0], [True] * 3)
    outcomes: list[tuple[float, object]] = []
    kill_at = 0.0
    with MqttUplink(broker.url, "dev7") as uplink:
        assert uplink.wait_connected(5.0)
        time.sleep(0.2)  # the reply subscription
        for i in range(N_REQUESTS // 2):
            if i == KILL_AFTER // 2:
                assert spy.pump(3.0, lambda: len(served) == 2 and all(served.values())), served
                os.kill(procs["worker-a"].pid, signal.SIGKILL)
                kill_at = time.monotonic()
            request = InferenceRequest(i, "dev7", manifest.bundle_id, time.time(), DEADLINE_MS,
                                       feats, mask)
            sent = time.monotonic()
            outcomes.append((sent, uplink.exchange(request, sent + DEADLINE_MS / 1000)))
            spy.client.loop(0)  # keep the telemetry spy's connection served
        time.sleep(0.3)
        counters = uplink.counters
    spy.close()
    degraded = [i for i, (_, reply) in enumerate(outcomes) if reply is None]
    assert all(isinstance(reply, InferenceReply) for _, reply in outcomes if reply is not None)
    assert all(sent <= kill_at + GRACE_S for sent, _ in (outcomes[i] for i in degraded)), degraded
    assert len(degraded) <= 2, degraded  # at most the one request worker-a held
    assert counters["duplicate_replies"] == 0 and counters["unknown_replies"] == 0, counters
