"""Issue 15 items 6 and 14 (`cloud acl`): the generated mosquitto.conf binds client ids to
accounts so no account can take over another's session, limits message size, and the
secrets are never written through a planted symlink. On a real mosquitto."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptedge.cli.main import main as cli
from adaptedge.cloud import CloudError, CloudService
from adaptedge.cloud.access.acl import MESSAGE_SIZE_LIMIT, largest_request_bytes, read_password_file
from adaptedge.cloud.transport.client import RequestClient
from adaptedge.protocol import InferenceReply, Manifest, encode
from adaptedge.protocol.topics import wildcard
from adaptedge.simulator.brokers import MosquittoBroker
from tests.attacks.cloud_helpers import request
from tests.support.toy_bundle import build_toy_bundle

SERVICE = "adaptedge-cloud"


class GeneratedConfigBroker(MosquittoBroker):
    """mosquitto with the test harness's listener/log lines plus the generated settings."""

    def __init__(self, conf: Path) -> None:
        super().__init__()
        self.generated = conf.read_text()

    def config_text(self) -> str:
        own = [line for line in super().config_text().splitlines()
               if not line.startswith(("allow_anonymous", "set_tcp_nodelay"))]
        return "\n".join(own) + "\n" + self.generated


@pytest.fixture()
def deployment(tmp_path: Path) -> Iterator[tuple[Path, Manifest, GeneratedConfigBroker]]:
    creds = tmp_path / "creds"
    assert cli(["cloud", "acl", "--devices", "dev1,dev2", "--out", str(creds),
                "--workers", "2"]) == 0
    manifest = build_toy_bundle(tmp_path / "toy")
    with GeneratedConfigBroker(creds / "mosquitto.conf") as broker:
        yield creds, manifest, broker


def login(broker: MosquittoBroker, creds: Path, user: str, client_id: str,
          device: str | None = None) -> RequestClient:
    client = RequestClient(broker.url, device or user, username=user, client_id=client_id,
                           password=read_password_file(creds / "secrets" / user))
    client.connect()
    return client


def still_connected(client: RequestClient, seconds: float = 0.5) -> bool:
    try:
        client.pump(seconds)
    except CloudError:  # "connection lost": the broker dropped it
        return False
    return client.client.is_connected()


@pytest.mark.broker
def test_a_device_cannot_take_over_another_accounts_client_id(
        deployment: tuple[Path, Manifest, GeneratedConfigBroker], tmp_path: Path) -> None:
    creds, manifest, broker = deployment
    conf = (creds / "mosquitto.conf").read_text()
    assert "use_username_as_clientid true" in conf and "set_tcp_nodelay true" in conf
    assert f"message_size_limit {MESSAGE_SIZE_LIMIT}" in conf
    workers = [CloudService(tmp_path / "toy", broker.url, username=user, client_id=f"cloud-w{i}",
                            password=read_password_file(creds / "secrets" / user))
               for i, user in enumerate((SERVICE, f"{SERVICE}-2"))]
    for worker in workers:
        worker.start()
    try:
        victim = login(broker, creds, "dev1", "adaptedge-edge-dev1")
        # dev2 connects again and again with the victim's and the workers' client ids.
        for target in ("adaptedge-edge-dev1", "cloud-w0", "cloud-w1", "dev1", SERVICE):
            attacker = login(broker, creds, "dev2", target)
            assert still_connected(attacker, 0.1)
            attacker.close()
        assert still_connected(victim)
        victim.send(encode(request(manifest, 1, [1.0, 2.0, 3.0])))
        assert victim.pump(5.0, lambda: victim.answered(1))
        assert isinstance(victim.replies[1][0][1], InferenceReply)
        assert all(w.running for w in workers)
        assert sum(w.stats()["received"] for w in workers) == 1  # no reconnect re-delivery
        victim.close()
    finally:
        for worker in workers:
            worker.stop()


@pytest.mark.broker
def test_the_broker_drops_publishes_over_the_size_limit_and_passes_the_largest_request(
        deployment: tuple[Path, Manifest, GeneratedConfigBroker]) -> None:
    creds, _, broker = deployment
    assert 2 * largest_request_bytes() <= MESSAGE_SIZE_LIMIT
    spy = login(broker, creds, SERVICE, "spy", device="spy")
    got: list[int] = []
    spy.subscribe(wildcard("req"))
    spy.client.on_message = lambda c, u, m: got.append(len(m.payload))
    dev = login(broker, creds, "dev1", "d1")
    dev.send(b"\0" * largest_request_bytes())
    dev.send(b"\0" * (MESSAGE_SIZE_LIMIT + 1))
    dev.send(b"\0" * 10)
    assert spy.pump(5.0, lambda: 10 in got)
    spy.pump(0.2)
    assert got == [largest_request_bytes(), 10]
    dev.close()
    spy.close()


def test_cloud_acl_replaces_planted_symlinks_instead_of_writing_through_them(
        tmp_path: Path) -> None:
    out, victim = tmp_path / "creds", tmp_path / "victim"
    (out / "secrets").mkdir(parents=True)
    victim.write_text("precious\n")
    os.symlink(victim, out / "secrets" / SERVICE)  # a link to an existing file
    os.symlink(tmp_path / "created-by-link", out / "passwd")  # a dangling link
    assert cli(["cloud", "acl", "--devices", "dev1", "--out", str(out)]) == 2  # refused
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "created-by-link").exists()
    assert cli(["cloud", "acl", "--devices", "dev1", "--out", str(out), "--force"]) == 0
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "created-by-link").exists()
    for name in ("passwd", f"secrets/{SERVICE}", "acl", "mosquitto.conf"):
        mode = (out / name).lstat().st_mode
        assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o600, name
    assert read_password_file(out / "secrets" / SERVICE) != "precious"


def test_the_docs_show_exactly_the_settings_cloud_acl_writes() -> None:
    from adaptedge.cloud.access.acl import mosquitto_conf_text

    docs = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    section = docs[docs.index("## Securing the broker"):]
    shown = section[section.index("# adaptedge broker settings"):section.index("# TLS instead")]
    folder = Path("/etc/mosquitto/adaptedge")
    written = mosquitto_conf_text(folder / "passwd", folder / "acl")
    settings = [line for line in written.splitlines() if line and not line.startswith("#")]
    assert [line for line in shown.splitlines() if line and not line.startswith("#")] == settings
