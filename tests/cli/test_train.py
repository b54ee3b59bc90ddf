"""``adaptedge train`` / ``evaluate`` end to end with a tiny method registered in this test
(logistic gates on heart's sensors); CLI errors are one clear line (exit 2)."""

from __future__ import annotations

import json
import os
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from adaptedge.cli.main import main
from adaptedge.cli.train import render
from adaptedge.cloud.fleet.drift import FleetDriftMonitor
from adaptedge.protocol.bundle import verify
from adaptedge.protocol.costs import hpc_cost
from adaptedge.protocol.operating_points import PairedCounts, wilson_interval
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.data.splits import certify_rows
from adaptedge.trainer.methods import registry as methods
from adaptedge.trainer.policy.graph import Graph
from adaptedge.trainer.policy.oracle import BundleRunner, evaluate_policy
from tests.trainer.export.test_bundle import heart_policies

TINY = "test-tiny"


def _tiny(dataset: Any, hpc: Any, options: methods.MethodOptions) -> list[Graph]:
    assert options.extra.get("flavour") in (None, "plain")
    return heart_policies(dataset)


@pytest.fixture(autouse=True)
def _tiny_method(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
                 ) -> None:
    monkeypatch.setitem(methods.METHOD_MODULES, TINY, __name__)
    monkeypatch.setitem(methods._REGISTRY, TINY, _tiny)
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "heart"
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(methods.METHOD_MODULES, TINY, __name__)
        mp.setitem(methods._REGISTRY, TINY, _tiny)
        mp.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
        assert main(["train", "--data", "heart", "--method", TINY, "--hpc", "hgb",
                     "--param", "flavour=plain", "--no-progress", "--out", str(out)]) == 0
    return out


def test_train_writes_a_verified_frontier_bundle(trained: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    m = verify(trained)
    assert m.metadata["method"] == TINY and m.metadata["dataset"] == "heart"
    assert "train_seconds" not in m.metadata and "numpy" in m.metadata["library_versions"]
    assert m.metadata["extra"] == {"flavour": "plain"}
    costs = [p.cost for p in m.operating_points]
    accs = [p.accuracy for p in m.operating_points]
    assert costs == sorted(costs) and all(a < b for a, b in pairwise(accs))
    # the validation rows split: half select (the front, the stored intervals), half certify
    data = load_dataset("heart")
    select, certify = certify_rows(data.y_val, 0.5, 0)
    assert m.metadata["certify"] == {"fraction": 0.5, "rows": len(certify), "seed": 0}
    n_val = len(select)
    for p in m.operating_points:
        assert p.accuracy_interval == pytest.approx(wilson_interval(p.accuracy, n_val))
        assert p.accuracy_interval[0] < p.accuracy < p.accuracy_interval[1]
    # the default: the paired rule on the held-out certify rows (issue 36), recounted here
    X_c, y_c = data.X_val[certify], data.y_val[certify]
    runner = BundleRunner.from_dir(trained)
    hpc_right = runner.hpc_proba(X_c).argmax(axis=1) == y_c
    overall = {}  # accuracy on every validation row: the default when nothing is certified
    for p in m.operating_points:
        right = runner.evaluate(p.policy, X_c).labels == y_c
        counts = PairedCounts.of(right.tolist(), hpc_right.tolist())
        assert counts.n == len(certify)
        assert p.paired_lower_bound == pytest.approx(counts.lower_bound)
        overall[p.name] = (p.accuracy * n_val + right.sum()) / (n_val + len(certify))
        assert p.paired_lower_bound <= counts.difference
    good = []  # fixed sequence: from the most expensive point down, up to the first failure
    for p in sorted(m.operating_points, key=lambda p: -p.cost):
        if (p.paired_lower_bound or -1) < -0.01:
            break
        good.append(p)
    want = min(good, key=lambda p: p.cost) if good else max(
        m.operating_points, key=lambda p: (overall[p.name], -p.cost))
    assert m.default_operating_point == want.name
    assert m.metadata["certified"] is bool(good)
    if not good:  # heart's 30 certify rows: said in one line, with the rows it would need
        rule = m.metadata["default_rule"]
        assert rule.startswith("NOT certified") and "\n" not in rule
        assert "certify rows" in rule and rule in render(m, trained, seconds=0.0).splitlines()[-3]


def test_train_writes_the_device_bundle_beside_the_full_one(
        trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    full, device = verify(trained), verify(trained.with_name("heart-device"))
    assert full.carries_hpc and not device.carries_hpc
    assert device.hpc.cloud_bundle == full.bundle_id and device.hpc_sha256 == full.hpc_sha256
    assert device.operating_points == full.operating_points
    assert device.default_operating_point == full.default_operating_point
    assert set(device.files) == set(full.files) - {full.hpc.file}


def test_evaluate_refuses_a_device_bundle_in_one_line(
        trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--bundle", str(trained.with_name("heart-device")), "--data",
                 "heart", "--split", "test"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a device bundle" in err and "an evaluation against " \
        "the HPC needs the full bundle it was cut from" in err


def test_trained_bundle_carries_the_drift_reference(trained: Path) -> None:
    """Every point's validation figures for the drift monitor, walked on the exported ONNX
    over the validation rows that chose the front (not the certify rows, not test; the same
    rows as the stored figures), so the live monitor runs the agreement chart too."""
    m = verify(trained)
    figures = m.metadata["drift_reference"]
    assert set(figures) == {p.name for p in m.operating_points}
    data = load_dataset("heart")
    X_sel = data.X_val[certify_rows(data.y_val, 0.5, 0)[0]]
    runner = BundleRunner.from_dir(trained)
    hpc = runner.hpc_proba(X_sel).argmax(axis=1)
    for point in m.operating_points:
        ref = figures[point.name]
        result = runner.evaluate(point.policy, X_sel)
        local = ~result.escalated
        assert ref["n_rows"] == len(X_sel)
        assert ref["escalation_rate"] == pytest.approx(point.escalation_rate)
        assert ref["n_local"] == int(local.sum())
        assert ref["local_agreement"] == pytest.approx((result.labels[local] == hpc[local]).mean())
        monitor = FleetDriftMonitor(m).monitor("dev", point.name)
        assert ("agreement", "down") in monitor.charts


def test_train_with_budget_prints_the_frontier(trained: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    budget = min(p.cost for p in verify(trained).operating_points) + 1.0
    out = tmp_path / "b"
    assert main(["train", "--data", "heart", "--method", TINY, "--hpc", "hgb", "--budget",
                 str(budget), "--no-progress", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    m = verify(out)
    chosen = m.operating_point(m.default_operating_point)
    assert chosen.cost <= budget
    assert all(p.accuracy <= chosen.accuracy for p in m.operating_points if p.cost <= budget)
    assert f"written to {out}" in text and m.bundle_id in text
    for p in m.operating_points:
        assert p.name in text


def test_evaluate_json(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--bundle", str(trained), "--data", "heart", "--split", "test",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"hpc", "cost_unit", "default_operating_point", "points",
                           "best_within_1pct", "not_certified"}
    assert set(report["hpc"]) == {"accuracy", "cost"}
    m = verify(trained)
    d = load_dataset("heart")
    assert report["hpc"]["cost"] == pytest.approx(hpc_cost(m).scalar)
    for point in report["points"]:
        assert set(point) == {"name", "default", "accuracy", "cost", "escalation_rate",
                              "avg_sensors_read", "energy_mj", "latency_ms", "bytes",
                              "validation_interval", "validation_paired_bound"}
        assert point["default"] == (point["name"] == m.default_operating_point)
        stored = m.operating_point(point["name"]).accuracy_interval
        assert point["validation_interval"] == pytest.approx(list(stored))
        res = evaluate_policy(trained, m.operating_point(point["name"]).policy, d.X_test,
                              d.y_test)
        assert point["accuracy"] == pytest.approx(res.accuracy)
        assert point["cost"] == pytest.approx(res.mean_cost)
    # best_within_1pct: certified by the paired bound against the HPC on the certify rows the
    # trainer held out, re-drawn here; the fixed sequence by the stored (selection) cost
    runner = BundleRunner.from_dir(trained)
    _, certify = certify_rows(d.y_val, 0.5, 0)
    X_c, y_c = d.X_val[certify], d.y_val[certify]
    hpc_right = runner.evaluate_hpc(X_c, y_c).labels == y_c
    val = {p.name: runner.evaluate(p.policy, X_c, y_c) for p in m.operating_points}
    bound = {n: PairedCounts.of((r.labels == y_c).tolist(), hpc_right.tolist()).lower_bound
             for n, r in val.items()}
    assert {p["name"]: p["validation_paired_bound"] for p in report["points"]} == pytest.approx(
        bound)
    assert bound == pytest.approx({p.name: p.paired_lower_bound for p in m.operating_points})
    eligible = []
    for p in sorted(m.operating_points, key=lambda p: -p.cost):
        if bound[p.name] < -0.01:
            break
        eligible.append(p.name)
    best = report["best_within_1pct"]
    if not eligible:
        assert best is None
        assert report["not_certified"].startswith("NOT certified")
    else:
        name = min(eligible, key=lambda n: m.operating_point(n).cost)
        assert set(best) == {"name", "accuracy", "cost", "cost_reduction"}
        assert best["name"] == name
        test_res = runner.evaluate(m.operating_point(name).policy, d.X_test, d.y_test)
        assert best["cost"] == pytest.approx(test_res.mean_cost)
        assert best["cost_reduction"] == pytest.approx(1 - test_res.mean_cost
                                                       / hpc_cost(m).scalar)


def test_evaluate_text_output(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--bundle", str(trained), "--data", "heart", "--split",
                 "validation"]) == 0
    out = capsys.readouterr().out
    assert "HPC (always cloud)" in out
    marked = [line.split()[0] for line in out.splitlines() if " * " in line or
              line.split()[1:2] == ["*"]]
    assert marked == [verify(trained).default_operating_point]
    assert "* the bundle's default operating point" in out


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("adaptedge: error:") and "\n" not in err and needle in err


def test_cli_errors_are_one_line(trained: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "x")
    _one_line_error(capsys, ["train", "--data", "heart", "--method", "nope", "--out", out],
                    "unknown method 'nope'")
    _one_line_error(capsys, ["train", "--data", "nope", "--method", TINY, "--out", out],
                    "unknown dataset 'nope'")
    _one_line_error(capsys, ["train", "--data", "heart", "--method", TINY, "--param", "oops",
                             "--out", out], "expected KEY=VALUE")
    # a budget below every point keeps the finished run: written, with a warning (issue 21)
    kept = str(tmp_path / "kept")
    assert main(["train", "--data", "heart", "--method", TINY, "--hpc", "hgb", "--budget", "0.5",
                 "--no-progress", "--out", kept]) == 0
    assert "raise --budget" in capsys.readouterr().err and Path(kept, "manifest.json").exists()
    _one_line_error(capsys, ["evaluate", "--bundle", str(trained), "--data", "thyroid"],
                    "do not match dataset 'thyroid'")
    _one_line_error(capsys, ["evaluate", "--bundle", str(tmp_path / "none"), "--data", "heart"],
                    "neither a bundle directory")
    assert not Path(out).exists()


def test_an_out_folder_that_cannot_be_written_fails_before_any_training(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 31 item 6: checked before fitting anything, in one line (not a traceback after
    the whole training). A file where a folder should be refuses even root."""
    def must_not_train(*args: Any) -> list[Graph]:
        raise AssertionError("training started although --out cannot be written")

    monkeypatch.setitem(methods._REGISTRY, TINY, must_not_train)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    _one_line_error(capsys, ["train", "--data", "heart", "--method", TINY, "--hpc", "hgb",
                             "--no-progress", "--out", str(blocker / "bundle")],
                    "cannot write a bundle here")
    if os.geteuid() != 0:  # root writes through a read-only folder's mode
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        _one_line_error(capsys, ["train", "--data", "heart", "--method", TINY, "--hpc", "hgb",
                                 "--no-progress", "--out", str(locked / "bundle")],
                        "cannot write a bundle here")


def test_val_fraction_gives_validation_more_rows(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``train --val-fraction``: validation holds that share of all rows (test unchanged), the
    paired counts are on those rows, and ``evaluate`` re-draws the same split from the bundle."""
    out = tmp_path / "vf"
    assert main(["train", "--data", "heart", "--method", TINY, "--hpc", "hgb",
                 "--val-fraction", "0.4", "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    m = verify(out)
    d = load_dataset("heart")
    n_all = len(d.y_train) + len(d.y_val) + len(d.y_test)
    assert m.split is not None
    assert m.split.fractions[1] == pytest.approx(round(0.4 * n_all) / n_all, abs=1e-6)
    assert m.split.fractions[2] == pytest.approx(len(d.y_test) / n_all, abs=1e-6)
    n_val = round(0.4 * n_all)  # half of them select, half certify
    assert m.metadata["drift_reference"][m.default_operating_point]["n_rows"] == (
        n_val - round(0.5 * n_val))
    assert main(["evaluate", "--bundle", str(out), "--data", "heart", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    stored = {p.name: p.paired_lower_bound for p in m.operating_points}
    assert {p["name"]: p["validation_paired_bound"] for p in report["points"]} == pytest.approx(
        stored)
    for bad in ("0", "1.5", "nan"):
        _one_line_error(capsys, ["train", "--data", "heart", "--method", TINY, "--val-fraction",
                                 bad, "--out", str(tmp_path / "x")], "--val-fraction")
    _one_line_error(capsys, ["train", "--data", "heart", "--method", TINY, "--hpc", "hgb",
                             "--val-fraction", "0.9", "--no-progress", "--out",
                             str(tmp_path / "y")], "--val-fraction 0.9")


@pytest.mark.slow
def test_the_bundle_is_the_same_for_any_jobs(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # a quick ADAPT-GBRT sweep (6 fits through parallel_map), each run on a cold cache so
    # that the HPC and its out-of-fold folds are refitted too; no --jobs: the core count
    ids, onnx = [], []
    for jobs in (["--jobs", "1"], ["--jobs", "2"], []):
        run = tmp_path / (jobs[-1] if jobs else "default")
        monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(run / "cache"))
        assert main(["train", "--data", "heart", "--method", "adapt-gbrt", "--quick",
                     "--hpc", "hgb", "--no-progress", *jobs, "--out", str(run / "b")]) == 0
        ids.append(verify(run / "b").bundle_id)
        onnx.append({p.name: p.read_bytes() for p in sorted((run / "b").glob("*.onnx*"))})
    assert ids == [ids[0]] * 3 and onnx == [onnx[0]] * 3 and len(onnx[0]) > 2



@pytest.mark.slow
@pytest.mark.parametrize("method", [["polydom", "--param", "max_sets=60"], ["l1"]])
def test_prefetched_lattices_and_warm_l1_paths_are_the_same_for_any_jobs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: list[str]) -> None:
    # polydom fits each layer's sets on --jobs processes before scoring them; l1 fits its C
    # grid as two warm-started stretches whatever --jobs is
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path / "cache"))
    ids = []
    for jobs in ("1", "2"):
        assert main(["train", "--data", "heart", "--method", *method, "--quick", "--hpc", "hgb",
                     "--no-progress", "--jobs", jobs, "--out", str(tmp_path / jobs)]) == 0
        ids.append(verify(tmp_path / jobs).bundle_id)
    assert ids[0] == ids[1]

@pytest.mark.slow
def test_certify_fraction_zero_bounds_on_the_rows_that_chose_and_bad_shares_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--certify-fraction 0``: no hold-out (the rule before; not valid under selection):
    every validation row chooses and certifies, and no ``certify`` record is written; ``0.3``
    holds out 30% of validation. Shares outside [0, 1) are refused in one line."""
    d = load_dataset("heart")
    for share, rows in (("0", None), ("0.3", round(0.3 * len(d.y_val)))):
        out = tmp_path / f"cf{share}"
        assert main(["train", "--data", "heart", "--method", TINY, "--hpc", "hgb",
                     "--certify-fraction", share, "--no-progress", "--out", str(out)]) == 0
        capsys.readouterr()
        m = verify(out)
        assert (m.metadata.get("certify") or {}).get("rows") == rows
        n_select = len(d.y_val) - (rows or 0)
        assert m.metadata["drift_reference"][m.default_operating_point]["n_rows"] == n_select
        assert main(["evaluate", "--bundle", str(out), "--data", "heart", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert {p["name"]: p["validation_paired_bound"] for p in report["points"]} == (
            pytest.approx({p.name: p.paired_lower_bound for p in m.operating_points}))
    for bad in ("1", "-0.1", "1.5"):
        _one_line_error(capsys, ["train", "--data", "heart", "--method", TINY,
                                 "--certify-fraction", bad, "--out", str(tmp_path / "x")],
                        "--certify-fraction")
