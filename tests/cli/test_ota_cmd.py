"""The rollout from the command line, as separate processes on a real mosquitto:
``cloud serve`` with two bundles, ``edge run --follow-updates``, ``fleet deploy --serve`` of a
signed device bundle (``export device --key``), ``fleet rollout-status``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adaptedge.cli.main import main
from adaptedge.edge.journal import read_journal
from adaptedge.protocol.bundle import read_manifest_body
from adaptedge.protocol.bundle_signing import sign_bundle
from adaptedge.protocol.bundle_version import stamp_version
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.dataset_bundle import build_dataset_bundle
from tests.support.ota_fleet import new_keys

pytestmark = [pytest.mark.broker, pytest.mark.slow]  # four processes, ~15 s on 2 busy cores
ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = "import sys; from adaptedge.cli.main import main; sys.exit(main(sys.argv[1:]))"


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", LAUNCHER, *args]


def _wait_line(proc: subprocess.Popen[str], text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if text in line:
            return
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"no {text!r} from the process within {timeout_s:g} s")


def test_deploy_from_the_command_line_to_a_running_device(tmp_path: Path,
                                                          mosquitto: MosquittoBroker) -> None:
    keys = new_keys(tmp_path / "keys")
    bundles = []
    for version in (1, 2):
        out = tmp_path / f"v{version}"
        build_dataset_bundle(out, "letter-binary", seed=version)
        stamp_version(out, version)
        sign_bundle(out, keys.private)
        bundles.append(out)
    device_part = tmp_path / "v2-device"  # what travels: the full bundle's part without HPC
    assert main(["export", "device", "--bundle", str(bundles[1]), "--out", str(device_part),
                 "--key", str(keys.private)]) == 0
    url = mosquitto.url
    cloud = subprocess.Popen(
        cli("cloud", "serve", "--bundle", str(bundles[0]), "--bundle", str(bundles[1]),
            "--broker", url, "--share", "off", "--trust", str(keys.public)),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    journal = tmp_path / "dev1.jsonl"
    device = None
    try:
        _wait_line(cloud, "ready", 60)
        device = subprocess.Popen(
            cli("edge", "run", "--bundle", str(bundles[0]), "--broker", url, "--device", "dev1",
                "--replay", "letter-binary", "--limit", "600", "--rate", "100",
                "--follow-updates", "--trust", str(keys.public), "--updates-dir",
                str(tmp_path / "updates"), "--json-out", str(journal), "--fsync-every", "0"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not journal.exists()
                                               or journal.read_text().count("decision") < 50):
            time.sleep(0.05)
        deploy = subprocess.run(
            cli("fleet", "deploy", "--bundle", str(device_part), "--devices", "dev1",
                "--broker", url, "--serve", "--timeout", "60", "--probation-decisions", "100",
                "--trust", str(keys.public), "--rollout", "canary-1"),
            capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert deploy.returncode == 0, deploy.stderr + deploy.stdout
        assert "dev1" in deploy.stdout and "active" in deploy.stdout
        status = subprocess.run(cli("fleet", "rollout-status", "--broker", url, "--json"),
                                capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert status.returncode == 0, status.stderr
        out, err = device.communicate(timeout=60)
        assert device.returncode == 0, err
        again = subprocess.run(  # a restart resumes on the bundle taken over the air
            cli("edge", "run", "--bundle", str(bundles[0]), "--broker", url, "--device", "dev1",
                "--replay", "letter-binary", "--limit", "20", "--follow-updates", "--trust",
                str(keys.public), "--updates-dir", str(tmp_path / "updates")),
            capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert again.returncode == 0 and "resuming on bundle" in again.stderr, again.stderr
    finally:
        for proc in (device, cloud):
            if proc is not None:
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(timeout=20)
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()
    rows = json.loads(status.stdout)
    assert [(r["device"], r["state"], r["active_version"], r["rollout"]) for r in rows] == \
        [("dev1", "active", 2, "canary-1")]
    decisions = [line for line in read_journal(journal) if line["kind"] == "decision"]
    assert [d["index"] for d in decisions] == list(range(600))
    ids = [d["bundle_id"] for d in decisions]
    b1, b2 = ids[0], rows[0]["active_bundle"]
    switch = ids.index(b2)
    assert 50 <= switch < 500 and ids == [b1] * switch + [b2] * (600 - switch)
    assert not [d for d in decisions if d["source"] == "degraded"]
    assert {d["source"] for d in decisions[switch:]} >= {"cloud"}
    assert f"bundle {b2}" in again.stdout  # the summary names the bundle that answered
    assert b2 == read_manifest_body(device_part)["bundle_id"]
    kept = tmp_path / "updates" / "bundles" / b2
    assert (kept / "manifest.json").is_file() and not (kept / "hpc.onnx").exists()
