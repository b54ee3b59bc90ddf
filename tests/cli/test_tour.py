"""Issue 21, a practitioner's first day: own CSV data reaches the device, the README's Python
snippet answers from the cloud, missing values get one documented behaviour everywhere."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main as cli
from adaptedge.protocol import Manifest
from adaptedge.simulator.brokers import MosquittoBroker

Bundle = tuple[Path, Manifest]


def write_csv(path: Path, *, n: int = 400, seed: int = 0, bad_cell: str | None = None) -> Path:
    """A CSV of four numeric features and a text label; ``bad_cell`` replaces row 7's 'c'."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0
    lines = ["a,b,c,d,label"]
    for i, (row, t) in enumerate(zip(X, y, strict=True)):
        cells = [f"{v:.4f}" for v in row]
        if bad_cell is not None and i == 6:
            cells[2] = bad_cell
        lines.append(",".join(cells) + (",yes" if t else ",no"))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def csv_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(CSV file, bundle trained on it by the real trainer)."""
    from adaptedge.trainer.api import train_bundle

    root = tmp_path_factory.mktemp("own-data")
    data = write_csv(root / "data.csv")
    train_bundle(str(data), "confidence", root / "bundle", target="label", quick=True,
                 progress=False)
    return data, root / "bundle"


# -- 1. own data reaches the device ---------------------------------------------------------

@pytest.mark.slow
def test_edge_run_replays_own_csv_with_target(csv_bundle: tuple[Path, Path],
                                              tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    data, bundle = csv_bundle
    journal = tmp_path / "decisions.jsonl"
    assert cli(["edge", "run", "--bundle", str(bundle), "--replay", str(data),
                "--target", "label", "--limit", "15", "--json-out", str(journal)]) == 0
    out = capsys.readouterr().out
    assert "decisions 15:" in out
    assert journal.read_text().count('"kind": "decision"') == 15


@pytest.mark.slow
def test_edge_run_csv_takes_its_target_from_the_bundle(csv_bundle: tuple[Path, Path],
                                                       tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    data, bundle = csv_bundle
    assert cli(["edge", "run", "--bundle", str(bundle), "--replay", str(data), "--limit",
                "3"]) == 0
    assert "decisions 3" in capsys.readouterr().out
    # a file without the bundle's label column: one line, no traceback
    other = tmp_path / "other.csv"
    other.write_text(data.read_text().replace("label", "outcome", 1))
    assert cli(["edge", "run", "--bundle", str(bundle), "--replay", str(other)]) == 2
    err = capsys.readouterr().err
    assert "label" in err and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.slow
@pytest.mark.broker
def test_simulate_hil_passes_target_to_devices(csv_bundle: tuple[Path, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    data, bundle = csv_bundle
    code = cli(["simulate", "--hil", "--bundle", str(bundle), "--data", str(data),
                "--target", "label", "--limit", "8", "--broker", "mosquitto",
                "--timeout", "60", "--report", str(tmp_path / "report"), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "8 decisions on 1 device(s) (hil)" in captured.out


def test_hil_failure_message_tells_exit_from_timeout() -> None:
    from adaptedge.simulator.hil import _how_it_ended

    assert _how_it_ended(2, 600.0) == "exit 2"
    assert "still running after 600 s" in _how_it_ended(None, 600.0)


# -- 2. one device id: the README snippet works as written ---------------------------------

@pytest.fixture()
def cloud(toy_bundle: Bundle, mosquitto: MosquittoBroker) -> Iterator[object]:
    from adaptedge.cloud import CloudService

    svc = CloudService(toy_bundle[0], mosquitto.url, client_id="first-day-cloud")
    svc.start()
    try:
        yield svc
    finally:
        svc.stop()


@pytest.mark.broker
def test_readme_snippet_gets_cloud_answers(toy_bundle: Bundle, mosquitto: MosquittoBroker,
                                           cloud: object) -> None:
    from adaptedge.edge import EdgeRuntime, MqttUplink

    path, _ = toy_bundle
    url = mosquitto.url
    # As the README writes it: the device id is given once, to the uplink.
    rt = EdgeRuntime.load(path, uplink=MqttUplink(url, "dev1").start(), operating_point="gate")
    uplink = rt.uplink
    assert uplink is not None and uplink.wait_connected(10.0)  # type: ignore[attr-defined]
    try:
        assert rt.device_id == "dev1"
        rows = np.random.default_rng(3).normal(scale=2.0, size=(300, 3)).astype(np.float32)
        decisions = []
        for row in rows:
            d = rt.predict({"a": lambda r=row: r[:2], "b": lambda r=row: r[2:]})
            if d.escalated:
                decisions.append(d)
            if len(decisions) >= 5:
                break
        assert len(decisions) == 5
        assert [d.source for d in decisions] == ["cloud"] * 5, [d.error for d in decisions]
    finally:
        rt.close()
        uplink.close()  # type: ignore[attr-defined]


def test_two_different_device_ids_are_refused(toy_bundle: Bundle) -> None:
    from adaptedge.edge import EdgeRuntime, MqttUplink
    from adaptedge.edge.errors import EdgeError

    uplink = MqttUplink("mqtt://127.0.0.1:1", "dev1")  # never started: no network
    with pytest.raises(EdgeError, match="'dev2' differs from the uplink's device id 'dev1'"):
        EdgeRuntime.load(toy_bundle[0], uplink=uplink, device_id="dev2")
    rt = EdgeRuntime.load(toy_bundle[0])
    assert rt.device_id == "edge"
    rt.close()


# -- 4. --param mistakes: one line from one table --------------------------------------------

@pytest.mark.parametrize(("method", "param", "words"), [
    ("dag", "lambda=1", ["unknown dag options ['lambda']", "lambdas, escalation"]),
    ("dag", "max_nodes=abc", ["max_nodes must be >= 1 (an integer), got 'abc'", "dag options:"]),
    ("adapt-gbrt", "warm_start=maybe", ["warm_start must be true or false, got 'maybe'",
                                         "adapt-gbrt options: warm_start"]),
    ("confidence", "k=3", ["unknown confidence options ['k']", "families, ks, order"]),
    ("adapt-lin", "k=3", ["unknown adapt-lin options ['k']", "takes no --param"]),
    ("dag", "escalation=sometimes", ["escalation must be one of both, on, off"]),
])
def test_param_mistakes_are_one_line_before_training(method: str, param: str, words: list[str],
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import time

    started = time.monotonic()
    assert cli(["train", "--data", "heart", "--method", method, "--param", param,
                "--out", str(tmp_path / "b"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    assert time.monotonic() - started < 5.0, "refused after training, not before"
    assert not (tmp_path / "b").exists()


def test_param_table_converts_strings_and_python_values() -> None:
    from adaptedge.trainer.methods.dag.sweep import CLASSIFIER_CHOICES
    from adaptedge.trainer.methods.params import DAG_PARAMS, ParamError, check_params

    assert check_params("dag", {"max_nodes": "12", "lambdas": "0.5,1", "escalation": "on"}) == {
        "max_nodes": 12, "lambdas": (0.5, 1.0), "escalation": "on"}
    assert check_params("adapt-gbrt", {"warm_start": "no"}) == {"warm_start": False}
    assert check_params("adapt-gbrt", {"warm_start": False, "grid": {"gamma": [1e-3]}}) == {
        "warm_start": False, "grid": {"gamma": [1e-3]}}
    with pytest.raises(ParamError, match="grid must be a dict"):
        check_params("adapt-gbrt", {"grid": "gamma=1"})
    with pytest.raises(ParamError, match="max_nodes must be >= 1"):
        check_params("dag", {"max_nodes": 2.5})
    classifier = next(p for p in DAG_PARAMS if p.key == "classifier")
    assert classifier.choices == CLASSIFIER_CHOICES


# -- 3. missing values: refused in data files, a failed read on a device ---------------------

@pytest.mark.slow
@pytest.mark.parametrize("cell", ["NaN", "nan", "", "inf", " -Infinity"])
def test_missing_values_in_a_csv_are_refused_on_every_path(cell: str, csv_bundle: tuple[Path, Path],
                                                           tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    _, bundle = csv_bundle
    bad = write_csv(tmp_path / "bad.csv", bad_cell=cell)
    commands = [
        ["train", "--data", str(bad), "--target", "label", "--method", "confidence", "--quick",
         "--out", str(tmp_path / "b"), "--no-progress"],
        ["evaluate", "--bundle", str(bundle), "--data", str(bad), "--target", "label"],
        ["edge", "run", "--bundle", str(bundle), "--replay", str(bad), "--target", "label"],
        ["simulate", "--bundle", str(bundle), "--data", str(bad), "--target", "label",
         "--report", str(tmp_path / "r"), "--no-progress"],
    ]
    for argv in commands:
        assert cli(argv) == 2, argv
        err = capsys.readouterr().err
        assert "column 'c' row 7" in err and "Traceback" not in err, (argv, err)
        assert err.count("\n") == 1, err


def test_missing_values_on_a_device_are_failed_reads(toy_bundle: Bundle) -> None:
    from adaptedge.edge import EdgeRuntime

    rt = EdgeRuntime.load(toy_bundle[0], operating_point="walk")
    try:
        d = rt.predict_row([0.5, float("nan"), 1.0])
        assert d.label in rt.manifest.classes
        assert "a" in d.failed_sensors and rt.counters["sensor_failures"] == 1
        d = rt.predict({"a": lambda: [0.5, 0.2], "b": lambda: [float("nan")]})
        assert d.label in rt.manifest.classes
        assert "b" not in d.sensors_read or "b" in d.failed_sensors
    finally:
        rt.close()


# -- 10. the suite never writes to the user's cache; adaptedge cache info|clear -------------

def test_the_suite_uses_a_private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    from adaptedge.trainer.data.cache import cache_root
    from tests.support.run_shared import run_root

    assert cache_root().is_relative_to(run_root(tmp_path_factory))  # shared by xdist's workers
    assert tmp_path_factory.getbasetemp().is_relative_to(run_root(tmp_path_factory))
    assert not cache_root().is_relative_to(Path.home() / ".cache")


def test_cache_info_and_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "cache"
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(root))
    (root / "hpc").mkdir(parents=True)
    (root / "hpc" / "fit.pkl").write_bytes(b"x" * 3000)
    (root / "demo" / "bundles").mkdir(parents=True)
    (root / "demo" / "bundles" / "m.json").write_text("{}")
    (root / "mine.txt").write_text("not adaptedge's")
    assert cli(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(root) in out and "2.9 KiB" in out and "1 files" in out
    assert cli(["cache", "clear", "hpc"]) == 0
    assert not (root / "hpc").exists() and (root / "demo").exists()
    assert cli(["cache", "clear"]) == 0
    assert "removed" in capsys.readouterr().out
    assert not (root / "demo").exists()
    assert (root / "mine.txt").read_text() == "not adaptedge's"  # only known parts go
    assert cli(["cache", "clear", "models"]) == 2
    assert "unknown cache part 'models'" in capsys.readouterr().err


# -- 5. progress without a terminal; a budget below every point keeps the run ---------------

def test_training_logs_progress_and_keeps_a_run_below_every_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from adaptedge.protocol.bundle import verify

    monkeypatch.setenv("ADAPTEDGE_PROGRESS_EVERY", "0")
    data = write_csv(tmp_path / "data.csv")
    out = tmp_path / "b"
    assert cli(["train", "--data", str(data), "--target", "label", "--method", "confidence",
                "--quick", "--budget", "0.01", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    # stderr is not a terminal here: periodic lines with stage, done/total and ETA
    # the quick tuned cascade fits 2 families x 3 sensor counts
    assert "[adaptedge] confidence: 6 steps" in captured.err
    assert "[adaptedge] confidence: 1/6 (17%)" in captured.err and "ETA" in captured.err
    assert "[adaptedge] confidence: 6/6 (100%)" in captured.err
    assert "\r" not in captured.err
    # the finished run is written, with a warning and the rule that chose the default
    assert "warning: no operating point costs <= 0.01" in captured.err
    manifest = verify(out)
    cheapest = min(manifest.operating_points, key=lambda p: p.cost)
    assert manifest.default_operating_point == cheapest.name
    assert "default operating point: the cheapest point: --budget 0.01 is below every" \
        in captured.out
    assert "stratified 60/20/20 split" in captured.out  # where the split came from


# -- 6. the stored description agrees with the costs actually used ---------------------------

def test_description_names_the_costs_file_not_uniform_costs(tmp_path: Path) -> None:
    from adaptedge.trainer.data.datasets import load_dataset

    data = write_csv(tmp_path / "data.csv")
    costs = tmp_path / "costs.toml"
    costs.write_text('[weights]\nenergy_mj = 1.0\n\n[[sensor]]\nname = "ab"\n'
                     'features = ["a", "b"]\nenergy_mj = 3.0\n\n[[sensor]]\nname = "cd"\n'
                     'features = ["c", "d"]\nenergy_mj = 0.5\n')
    plain = load_dataset(str(data), target="label").description
    assert "uniform cost" in plain
    described = load_dataset(str(data), target="label", costs=costs).description
    assert "uniform cost" not in described and "nominal" not in described
    assert described.endswith("split. Sensors and costs from costs.toml.")  # one space
