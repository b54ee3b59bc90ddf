"""Recalibration (trainer.recalibrate, trainer.gate_bias, adaptedge recalibrate): unbiased
estimates from escalated + audit rows, the escalation bias knob, the new bundle's provenance."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main
from adaptedge.protocol import Manifest, verify
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.protocol.fleet_rows import LabelledRow
from adaptedge.trainer.fleet_rows_io import read_rows, write_rows
from adaptedge.trainer.gate_bias import biased_policy
from adaptedge.trainer.policy.oracle import BundleRunner
from adaptedge.trainer.recalibrate import (
    RecalibrationError,
    estimate,
    recalibrate,
    row_sample,
)

AUDIT = AuditPolicy(fraction=0.2, seed=3)


def _field(bundle: Path, manifest: Manifest, n: int, seed: int, shift: float = 0.0
           ) -> tuple[list[LabelledRow], float, np.ndarray]:
    """Rows a device at policy "gate" would send for n inputs, and the true agreement."""
    X = np.random.default_rng(seed).normal(size=(n, 3)).astype(np.float32) + shift
    runner = BundleRunner.from_dir(bundle)
    result = runner.evaluate("gate", X)
    hpc = np.argmax(runner.hpc_proba(X), axis=1)
    audited = AUDIT.selected_many("d", np.arange(n), 0) & ~result.escalated
    rows = [LabelledRow("d", manifest.bundle_id, int(i), "escalated" if result.escalated[i] else
                        "audit", 0, tuple(float(v) for v in X[i]),
                        None if result.escalated[i] else int(result.labels[i]), int(hpc[i]),
                        float(i))
            for i in np.flatnonzero(result.escalated | audited)]
    truth = float(np.mean(result.escalated | (result.labels == hpc)))
    return rows, truth, X


def test_weighted_estimate_is_unbiased_where_the_naive_one_is_not(
        toy_bundle: tuple[Path, Manifest]) -> None:
    bundle, manifest = toy_bundle
    rows, truth, _ = _field(bundle, manifest, 4000, seed=0)
    sample = row_sample(rows, manifest, AUDIT)
    assert set(sample.counts) == {"escalated", "audit"} and sample.counts["audit"] > 100
    est = estimate(BundleRunner.from_dir(bundle), "gate", "gate", 0.0, sample)
    naive = float(np.mean([r.kind == "escalated" or r.local_label == r.hpc_label
                           for r in rows]))
    assert abs(est.agreement - truth) < 0.03
    assert naive - truth > 0.05  # the escalated rows alone would flatter the gate


def test_bias_moves_the_gate(toy_bundle: tuple[Path, Manifest]) -> None:
    bundle, manifest = toy_bundle
    files = {f: (bundle / f).read_bytes() for f in manifest.files}
    X = np.random.default_rng(1).normal(size=(500, 3)).astype(np.float32)
    rates = []
    for bias in (-1e3, 0.0, 1e3):
        graph, new = biased_policy(manifest.policies["gate"], files, bias)
        m = Manifest(**{**{f: getattr(manifest, f) for f in manifest.__dataclass_fields__},
                        "policies": {"g": graph}})
        rates.append(BundleRunner.from_files(m, {**files, **new}).evaluate("g", X)
                     .escalation_rate)
    assert rates[0] == 0.0 and rates[2] == 1.0 and 0.0 < rates[1] < 1.0


def test_recalibrate_restores_agreement_after_drift(toy_bundle: tuple[Path, Manifest],
                                                    tmp_path: Path) -> None:
    bundle, manifest = toy_bundle
    rows, before, _ = _field(bundle, manifest, 3000, seed=2, shift=0.8)
    result = recalibrate(bundle, rows, tmp_path / "b2", audit=AUDIT, target=0.999,
                         tolerance=0.0)
    new = verify(tmp_path / "b2")
    prov = new.metadata["recalibration"]
    assert prov["source_bundle"] == manifest.bundle_id
    assert prov["rows"] == {"escalated": sum(r.kind == "escalated" for r in rows),
                            "audit": sum(r.kind == "audit" for r in rows)}
    assert prov["received_at"] == [rows[0].received_at, rows[-1].received_at]
    assert new.default_operating_point == result.chosen.name
    assert new.metadata["drift_reference"][result.chosen.name]["n_rows"] > 0
    # fresh inputs from the drifted distribution: the new default agrees more with the HPC
    X = np.random.default_rng(9).normal(size=(3000, 3)).astype(np.float32) + 0.8
    runner = BundleRunner.from_dir(tmp_path / "b2")
    hpc = np.argmax(runner.hpc_proba(X), axis=1)
    out = runner.evaluate(new.operating_point(new.default_operating_point).policy, X)
    after = float(np.mean(out.escalated | (out.labels == hpc)))
    assert after > before and after >= 0.995


def test_a_device_bundle_is_refused_in_one_line(toy_bundle: tuple[Path, Manifest],
                                                tmp_path: Path) -> None:
    from adaptedge.protocol.device_bundle import write_device_bundle
    from adaptedge.protocol.errors import BundleError

    bundle, manifest = toy_bundle
    write_device_bundle(bundle, manifest, tmp_path / "dev")
    rows, _, _ = _field(bundle, manifest, 300, seed=2)
    with pytest.raises(BundleError, match=r"is a device bundle.*recalibration .* needs the full "
                       r"bundle it was cut from"):
        recalibrate(tmp_path / "dev", rows, tmp_path / "dev2", audit=AUDIT)
    assert not (tmp_path / "dev2").exists()


def test_rows_need_audits_and_the_right_bundle(toy_bundle: tuple[Path, Manifest]) -> None:
    bundle, manifest = toy_bundle
    rows, _, _ = _field(bundle, manifest, 300, seed=4)
    with pytest.raises(RecalibrationError, match="no audit rows"):
        row_sample([r for r in rows if r.kind == "escalated"], manifest, AUDIT)
    with pytest.raises(RecalibrationError, match="no labelled rows of bundle"):
        row_sample(rows, Manifest(**{**{f: getattr(manifest, f) for f in
                                        manifest.__dataclass_fields__}, "bundle_id": "other"}),
                   AUDIT)


def test_rows_jsonl_round_trip(tmp_path: Path) -> None:
    row = LabelledRow("d", "b", 7, "audit", None, (1.0, math.nan), 1, 0, 12.5)
    write_rows(tmp_path / "r.jsonl", [row])
    back = read_rows(tmp_path / "r.jsonl")[0]
    assert back.features[0] == 1.0 and math.isnan(back.features[1])
    assert (back.kind, back.point, back.received_at) == ("audit", None, 12.5)
    (tmp_path / "bad.jsonl").write_text('{"device": "d"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not a labelled row: missing"):
        read_rows(tmp_path / "bad.jsonl")


def test_regression_rows_jsonl_keep_their_values_and_classification_lines_do_not_change(
        tmp_path: Path) -> None:
    """Issue 33: a regression row's values round-trip; a classification row's line has the
    keys it had before regression rows existed, and such older lines still read."""
    valued = LabelledRow("d", "b", 8, "audit", 0, (2.0,), None, -1, 3.0, 0.1, 41.5, 40.0)
    plain = LabelledRow("d", "b", 7, "audit", None, (1.0,), 1, 0, 12.5, 0.02)
    write_rows(tmp_path / "r.jsonl", [valued, plain])
    assert read_rows(tmp_path / "r.jsonl") == [valued, plain]
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert (lines[0]["hpc_value"], lines[0]["local_value"]) == (41.5, 40.0)
    assert set(lines[1]) == {"device", "bundle_id", "request_id", "kind", "point", "features",
                             "local_label", "hpc_label", "received_at", "audit_fraction"}
    (tmp_path / "bad.jsonl").write_text(json.dumps({**lines[0], "hpc_value": "x"}) + "\n")
    with pytest.raises(ValueError, match="hpc_value must be a finite number"):
        read_rows(tmp_path / "bad.jsonl")


def test_cli_recalibrate_refuses_a_regression_bundle_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.toy_regression_bundle import build_toy_regression_bundle

    build_toy_regression_bundle(tmp_path / "b")
    write_rows(tmp_path / "rows.jsonl", [])
    assert main(["recalibrate", "--bundle", str(tmp_path / "b"), "--rows",
                 str(tmp_path / "rows.jsonl"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a regression bundle" in err and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_cli_recalibrate_from_rows(toy_bundle: tuple[Path, Manifest], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    bundle, manifest = toy_bundle
    rows, _, _ = _field(bundle, manifest, 1500, seed=5, shift=0.5)
    write_rows(tmp_path / "rows.jsonl", rows)
    args = ["recalibrate", "--bundle", str(bundle), "--rows", str(tmp_path / "rows.jsonl"),
            "--out", str(tmp_path / "b2"), "--audit-fraction", "0.2", "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["bundle_id"] == verify(tmp_path / "b2").bundle_id
    assert report["rows"]["audit"] == sum(r.kind == "audit" for r in rows)
    assert main([*args[:-3], "--audit-fraction", "0"]) == 2
    assert "audit fraction is 0" in capsys.readouterr().err


def test_thin_evidence_keeps_the_deployed_point(toy_bundle: tuple[Path, Manifest]) -> None:
    from adaptedge.trainer.recalibrate import Estimate, _choose

    deployed = toy_bundle[1].default_operating_point  # "walk"
    def e(name: str, agreement: float, cost: float) -> Estimate:
        return Estimate(name, name.split("@")[0], 0.0, agreement, 0.2, cost, 1.0, agreement, 50)

    tied = [e("walk", 1.0, 8.0), e("walk@b+1", 1.0, 9.0), e("gate", 1.0, 5.0)]
    assert _choose(tied, deployed, 0.99, 0.0, 60) == 0  # no evidence for the cheaper one
    better = [e("walk", 0.95, 8.0), e("gate", 1.0, 5.0), e("walk@b+1", 1.0, 9.0)]
    assert _choose(better, deployed, 0.99, 0.0, 60) == 1  # highest bound, the cheaper
    assert _choose(tied, deployed, 0.99, 0.0, 100_000) == 2  # confident: the cheapest


def test_the_deployed_point_is_the_one_the_rows_came_from(toy_bundle: tuple[Path, Manifest]
                                                         ) -> None:
    from adaptedge.protocol.fleet_rows import LabelledRow
    from adaptedge.trainer.recalibrate import deployed_point

    manifest = toy_bundle[1]
    names = [p.name for p in manifest.operating_points]
    other = next(i for i, n in enumerate(names) if n != manifest.default_operating_point)

    def row(point: int | None) -> LabelledRow:
        return LabelledRow("d", manifest.bundle_id, 0, "audit", point, (0.0,), 0, 0, 0.0)

    assert deployed_point(manifest, []) == manifest.default_operating_point
    assert deployed_point(manifest, [row(None), row(99)]) == manifest.default_operating_point
    assert deployed_point(manifest, [row(other), row(other), row(None)]) == names[other]


def test_bias_keeps_each_nodes_compute_cost(toy_bundle: tuple[Path, Manifest]) -> None:
    """A biased node is the same node with another model file: its evaluation cost, sensors
    and actions stay (the node's ``compute`` was once dropped)."""
    from dataclasses import replace

    from adaptedge.protocol.policy_graph import ComputeCost, PolicyGraph

    _, manifest = toy_bundle
    bundle_files = {f: (toy_bundle[0] / f).read_bytes() for f in manifest.files}
    graph = manifest.policies["gate"]
    cost = ComputeCost(energy_mj=0.25, latency_ms=0.5, units=0.01)
    priced = PolicyGraph(root=graph.root, nodes={k: replace(n, compute=cost)
                                                 for k, n in graph.nodes.items()})
    biased, new = biased_policy(priced, bundle_files, 2.0)
    assert new, "the toy gate has no head: biasing writes a new model file"
    for key, node in biased.nodes.items():
        assert node.compute == cost
        assert (node.sensors, node.actions) == (graph.nodes[key].sensors,
                                                 graph.nodes[key].actions)
        assert node.model.file in new
