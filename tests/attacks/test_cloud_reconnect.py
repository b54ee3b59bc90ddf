"""Issue 15 item 7: when the broker starts refusing the worker's credentials, the worker backs
off (jittered, one log line per back-off) and exits non-zero with one clear line after a
bounded number of refusals, instead of reconnecting thousands of times a second forever."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from adaptedge.cli.main import main as cli
from adaptedge.cloud.transport.connection import MAX_REFUSALS
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.toy_bundle import build_toy_bundle

pytestmark = pytest.mark.broker
REPO = Path(__file__).resolve().parents[2]
SERVICE = "adaptedge-cloud"


def test_refused_credentials_after_a_restart_end_the_worker_with_one_line(
        tmp_path: Path) -> None:
    creds, log = tmp_path / "creds", tmp_path / "worker.log"
    assert cli(["cloud", "acl", "--devices", "dev1", "--out", str(creds)]) == 0
    build_toy_bundle(tmp_path / "toy")
    broker = MosquittoBroker(password_file=creds / "passwd", acl_file=creds / "acl")
    broker.start()
    worker = None
    try:
        cmd = [sys.executable, "-m", "adaptedge.cli.main", "cloud", "serve",
               "--bundle", str(tmp_path / "toy"), "--broker", broker.url, "--client-id", "w1",
               "--username", SERVICE, "--password-file", str(creds / "secrets" / SERVICE)]
        with log.open("wb") as fh:
            worker = subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while "ready" not in log.read_text() and time.monotonic() < deadline:
            assert worker.poll() is None, log.read_text()[-2000:]
            time.sleep(0.05)
        # The operator rotates every password and restarts the broker: the worker's is stale.
        assert cli(["cloud", "acl", "--devices", "dev1", "--out", str(creds), "--force"]) == 0
        broker.restart()
        try:
            code = worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        text = log.read_text()
        broker_log = broker.log()
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait(5)
        broker.stop()
    assert code not in (None, 0), f"the worker is still reconnecting: {text[-1500:]}"
    refusals = broker_log.count("not authorised")
    assert 1 <= refusals <= MAX_REFUSALS, refusals
    errors = [line for line in text.splitlines() if line.startswith("adaptedge: error:")]
    assert len(errors) == 1 and "refused" in errors[0] and "gave up after" in errors[0], text
    assert "Traceback" not in text
    backoffs = [line for line in text.splitlines()
                if "retrying in" in line and "refused the connection" in line]
    assert len(backoffs) == MAX_REFUSALS - 1, text  # one line per back-off
    assert len(text) < 20_000


def test_two_workers_with_one_client_id_back_off_instead_of_flapping(tmp_path: Path) -> None:
    """Issue 31 item 6: two workers that share a client id (one account under mosquitto's
    use_username_as_clientid) take the session from each other; each must pause, growing,
    instead of reconnecting at once (~56,000 takeovers in minutes were seen)."""
    from adaptedge.cloud import CloudService

    build_toy_bundle(tmp_path / "toy")
    with MosquittoBroker() as broker:
        workers = [CloudService(tmp_path / "toy", broker.url, client_id="same-id",
                                stats_every_s=60.0) for _ in range(2)]
        try:
            for worker in workers:
                worker.start()
            time.sleep(4.0)
            assert all(worker.running for worker in workers)
        finally:
            for worker in workers:
                worker.stop(timeout_s=1.0)
        takeovers = broker.log_path.read_text().count("already connected, closing old connection")
    assert 1 <= takeovers <= 20, takeovers
