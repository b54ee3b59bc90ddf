"""`adaptedge cloud acl` output in a real mosquitto: devices confined to their own topics,
the service account able to serve, wrong passwords refused."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptedge.cli.main import main as cli
from adaptedge.cloud import CloudError, CloudService
from adaptedge.cloud.access.acl import mosquitto_hash, read_password_file
from adaptedge.cloud.transport.client import RequestClient
from adaptedge.protocol import InferenceReply, InferenceRequest, Manifest, encode, pack_features
from adaptedge.protocol.topics import reply_topic, request_topic, wildcard
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.toy_bundle import build_toy_bundle

pytestmark = pytest.mark.broker
SERVICE = "adaptedge-cloud"


@pytest.fixture()
def deployment(tmp_path: Path) -> Iterator[tuple[Path, Path, Manifest, MosquittoBroker]]:
    """Credentials written by the CLI, a mosquitto using them, and a bundle."""
    creds = tmp_path / "creds"
    assert cli(["cloud", "acl", "--devices", "dev1,dev2", "--out", str(creds)]) == 0
    manifest = build_toy_bundle(tmp_path / "toy")
    with MosquittoBroker(password_file=creds / "passwd", acl_file=creds / "acl") as broker:
        yield creds, tmp_path / "toy", manifest, broker


def login(broker: MosquittoBroker, creds: Path, user: str, device: str | None = None,
          *, subscribe: bool = True) -> RequestClient:
    client = RequestClient(broker.url, device or user, username=user,
                           password=read_password_file(creds / "secrets" / user),
                           client_id=f"{user}-{time.monotonic_ns()}")
    client.connect(subscribe=subscribe)
    return client


def request(manifest: Manifest, rid: int, device: str) -> bytes:
    feats, mask = pack_features([1.0, 2.0, 3.0], [True] * 3)
    return encode(InferenceRequest(rid, device, manifest.bundle_id, time.time(), 60_000.0,
                                   feats, mask))


def test_files_are_private_and_the_cli_prints_the_config(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "creds"
    assert cli(["cloud", "acl", "--devices", "a,b", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"password_file {(out / 'passwd').resolve()}" in printed
    assert f"acl_file {(out / 'acl').resolve()}" in printed and "allow_anonymous false" in printed
    for name in ("passwd", "acl", "secrets/a", "secrets/b", f"secrets/{SERVICE}"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name
    passwords = {u: read_password_file(out / "secrets" / u) for u in ("a", "b", SERVICE)}
    assert not any(p in printed for p in passwords.values())  # never printed
    assert len(set(passwords.values())) == 3
    assert cli(["cloud", "acl", "--devices", "a", "--out", str(out)]) == 2  # refuses to overwrite
    assert cli(["cloud", "acl", "--devices", "bad/name", "--out", str(tmp_path / "x")]) == 2
    assert cli(["cloud", "acl", "--devices", "a", "--out", str(tmp_path / "y"),
                "--broker-user", "no-such-user-here"]) == 2
    assert not (tmp_path / "y").exists()


def test_hash_format_is_mosquittos_pbkdf2_sha512() -> None:
    import base64
    import hashlib
    salt = bytes(range(12))
    parts = mosquitto_hash("secret", salt=salt).split("$")
    assert parts[:3] == ["", "7", "101"] and base64.b64decode(parts[3]) == salt
    assert base64.b64decode(parts[4]) == hashlib.pbkdf2_hmac("sha512", b"secret", salt, 101, 64)


def test_devices_are_confined_and_the_service_serves(
        deployment: tuple[Path, Path, Manifest, MosquittoBroker]) -> None:
    creds, bundle, manifest, broker = deployment
    svc = CloudService(bundle, broker.url, username=SERVICE,
                       password=read_password_file(creds / "secrets" / SERVICE), client_id="w")
    svc.start()
    try:
        assert svc.shared_subscription  # the probe passed the ACL, too
        dev1 = login(broker, creds, "dev1")
        dev2 = login(broker, creds, "dev2")
        spy = login(broker, creds, SERVICE, "spy", subscribe=False)  # sees every request
        spy.subscribe(wildcard("req"))
        spied: list[str] = []
        spy.client.on_message = lambda c, u, m: spied.append(m.topic)

        # dev1 may not read dev2's replies: mosquitto 2.0 grants the SUBSCRIBE of a 3.1.1
        # client but checks the ACL on every delivery and never delivers (asserted below) ...
        dev1.subscribe(reply_topic("dev2"))
        # ... nor publish on dev2's request topic: the broker drops it silently.
        dev1.send(request(manifest, 1, "dev2"), topic=request_topic("dev2"))
        dev1.send(request(manifest, 2, "dev1"))
        dev2.send(request(manifest, 3, "dev2"))
        assert dev1.pump(5.0, lambda: dev1.answered(2))
        assert dev2.pump(5.0, lambda: dev2.answered(3))
        spy.pump(0.3)
        for client in (dev1, dev2):
            client.pump(0.2)
        assert isinstance(dev1.replies[2][0][1], InferenceReply)
        assert isinstance(dev2.replies[3][0][1], InferenceReply)
        assert set(dev1.replies) == {2} and set(dev2.replies) == {3}  # dev2's reply stayed private
        # Two connections: the broker may deliver dev2's request before dev1's.
        assert sorted(spied) == [request_topic("dev1"), request_topic("dev2")]
        assert svc.stats()["received"] == 2
        for client in (dev1, dev2, spy):
            client.close()
    finally:
        svc.stop()


def test_wrong_password_and_unknown_user_are_refused(
        deployment: tuple[Path, Path, Manifest, MosquittoBroker]) -> None:
    _, bundle, _, broker = deployment
    for user, password in (("dev1", "wrong"), ("nobody", "x"), (SERVICE, "wrong")):
        client = RequestClient(broker.url, "dev1", username=user, password=password)
        with pytest.raises(CloudError, match="refused"):
            client.connect()
    with pytest.raises(CloudError, match="refused"):
        CloudService(bundle, broker.url, username=SERVICE, password="wrong").start()
    anonymous = RequestClient(broker.url, "dev1")
    with pytest.raises(CloudError, match="refused"):
        anonymous.connect()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_broker_user_lets_a_privilege_dropping_mosquitto_read_the_files() -> None:
    try:
        pwd.getpwnam("mosquitto")
    except KeyError:
        pytest.skip("no 'mosquitto' system user")
    folder = Path(tempfile.mkdtemp(prefix="adaptedge-acl-"))  # pytest's tmp is root-only
    try:
        folder.chmod(0o755)  # the mosquitto user must reach the files
        creds = folder / "creds"
        assert cli(["cloud", "acl", "--devices", "dev1", "--out", str(creds),
                    "--broker-user", "mosquitto"]) == 0

        class Dropping(MosquittoBroker):  # as in production: root drops to the mosquitto user
            def config_text(self) -> str:
                return super().config_text().replace("user root\n", "")

        with Dropping(password_file=creds / "passwd", acl_file=creds / "acl") as broker:
            dev = RequestClient(broker.url, "dev1", username="dev1",
                                password=read_password_file(creds / "secrets" / "dev1"))
            dev.connect()
            dev.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
