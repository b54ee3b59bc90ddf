"""Issue 21 item 7, MQTT conventions: broker URLs with credentials or without a scheme,
credentials from the environment, ``edge run --prefix``, degraded decisions reported by reason,
and shipped scenarios by name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptedge import simulator
from adaptedge.cli.broker import resolve_broker
from adaptedge.cli.errors import CommandError
from adaptedge.cli.main import main as cli
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.dataset_bundle import build_dataset_bundle


def test_credentials_in_the_url_are_taken_out_with_a_warning(
        capsys: pytest.CaptureFixture[str]) -> None:
    login = resolve_broker("mqtt://dev1:s%40cret@broker.example:1884")
    assert (login.url, login.username, login.password) == (
        "mqtt://broker.example:1884", "dev1", "s@cret")
    assert "--password-file" in capsys.readouterr().err


def test_host_port_without_a_scheme_and_credentials_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    monkeypatch.setenv("ADAPTEDGE_MQTT_USERNAME", "dev7")
    monkeypatch.setenv("ADAPTEDGE_MQTT_PASSWORD_FILE", str(secret))
    login = resolve_broker("10.0.0.5:1883")
    assert (login.url, login.username, login.password) == ("mqtt://10.0.0.5:1883", "dev7",
                                                           "from-file")
    assert capsys.readouterr().err == ""  # no password on a command line: no warning
    other = tmp_path / "other"
    other.write_text("option\n")
    login = resolve_broker("mqtts://h", username="u", password_file=other)
    assert (login.url, login.username, login.password) == ("mqtts://h", "u", "option")
    monkeypatch.delenv("ADAPTEDGE_MQTT_USERNAME")
    with pytest.raises(CommandError, match="password was given without a user name"):
        resolve_broker("h:1883")
    with pytest.raises(CommandError, match="invalid port"):
        resolve_broker("h:notaport")


@pytest.fixture(scope="module")
def heart_bundles(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("heart")
    build_dataset_bundle(root / "a", "heart", escalate=0.5, seed=0)
    build_dataset_bundle(root / "b", "heart", escalate=0.5, seed=1)
    return root / "a", root / "b"


@pytest.fixture()
def cloud_on(mosquitto: MosquittoBroker) -> Iterator[object]:
    from adaptedge.cloud import CloudService

    services = []

    def start(bundle: Path, prefix: str) -> None:
        svc = CloudService(bundle, mosquitto.url, prefix=prefix, client_id=f"cloud-{prefix}")
        svc.start()
        services.append(svc)

    yield start
    for svc in services:
        svc.stop()


@pytest.mark.broker
def test_edge_run_prefix_and_host_port_reach_the_cloud(
        heart_bundles: tuple[Path, Path], mosquitto: MosquittoBroker, cloud_on: object,
        capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = heart_bundles
    cloud_on(a, "plant7")  # type: ignore[operator]
    hostport = mosquitto.url.split("://", 1)[1]
    assert cli(["edge", "run", "--bundle", str(a), "--broker", f"u:p@{hostport}",
                "--device", "dev1", "--prefix", "plant7", "--replay", "heart",
                "--limit", "20", "--telemetry-every", "0"]) == 0
    captured = capsys.readouterr()
    assert "a password in the broker URL" in captured.err
    cloud_line = next(line for line in captured.out.splitlines() if line.startswith("decisions"))
    assert "cloud 0," not in cloud_line and "degraded 0 " in cloud_line, captured.out


@pytest.mark.broker
def test_a_bundle_no_worker_serves_degrades_at_the_deadline_counted_by_reason(
        heart_bundles: tuple[Path, Path], mosquitto: MosquittoBroker, cloud_on: object,
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = heart_bundles
    cloud_on(b, "adaptedge")  # type: ignore[operator]  # the cloud serves another bundle
    journal = tmp_path / "run.jsonl"
    assert cli(["edge", "run", "--bundle", str(a), "--broker", mosquitto.url, "--device", "dev2",
                "--replay", "heart", "--limit", "20", "--json-out", str(journal)]) == 0
    captured = capsys.readouterr()
    # Requests name their bundle in the topic: no worker of another bundle takes them.
    assert "unknown_bundle" not in captured.out + captured.err
    reasons = next(line for line in captured.out.splitlines()
                   if line.startswith("degraded by reason"))
    assert reasons.startswith("degraded by reason: deadline ")
    assert cli(["edge", "summary", str(journal), "--json"]) == 0
    assert '"deadline":' in capsys.readouterr().out
    assert journal.stat().st_mode & 0o777 == 0o600  # sensor readings: the owner's only


def test_shipped_scenarios_by_name() -> None:
    from adaptedge.simulator.scenario import ScenarioError, load_scenario, shipped_scenarios

    assert {"ideal", "flaky-link"} <= set(shipped_scenarios())
    by_name = load_scenario("flaky-link")
    assert by_name == load_scenario(Path(simulator.__file__).resolve().parent / "scenarios" / "flaky-link.toml")
    assert load_scenario("flaky-link.toml") == by_name
    with pytest.raises(ScenarioError, match=r"shipped: .*flaky-link"):
        load_scenario("flakey-link")
