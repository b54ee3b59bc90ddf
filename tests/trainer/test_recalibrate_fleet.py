"""The store is the contract between the fleet loop and recalibration: rows written to a
``FleetStore`` come back as the same ``LabelledRow``s, so ``recalibrate --db`` picks exactly
what ``recalibrate --rows`` picks from the same rows."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaptedge.cli.main import main
from adaptedge.cloud.fleet.ingest import StoreIngest
from adaptedge.cloud.fleet.store import FleetStore, NewRecord
from adaptedge.cloud.service.inference import HpcInference
from adaptedge.edge import EdgeRuntime, MqttUplink, Outbox
from adaptedge.edge.drain import OutboxDrainer
from adaptedge.protocol import Manifest
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.protocol.features import pack_features
from adaptedge.protocol.fleet_rows import LabelledRow
from adaptedge.trainer.fleet_rows_io import write_rows
from tests.trainer.test_recalibrate import _field


def _record(row: LabelledRow) -> NewRecord:
    values = np.array([0.0 if math.isnan(v) else v for v in row.features], dtype=np.float32)
    features, mask = pack_features(values, ~np.isnan(np.array(row.features)))
    return NewRecord(row.device, row.request_id, bytes(16), row.bundle_id, row.kind, row.point,
                     features, mask, row.local_label, row.hpc_label, None, row.received_at,
                     row.received_at)


@pytest.mark.slow
def test_recalibrate_from_the_store_equals_from_rows(toy_bundle: tuple[Path, Manifest],
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bundle, manifest = toy_bundle
    rows, _, _ = _field(bundle, manifest, 1500, seed=5, shift=0.5)
    with FleetStore(tmp_path / "fleet.db") as store:
        assert set(store.add_records([_record(r) for r in rows])) == {"stored"}
        assert store.labelled_rows(bundle_id=manifest.bundle_id) == rows
    write_rows(tmp_path / "rows.jsonl", rows)
    common = ["--audit-fraction", "0.2", "--json"]
    assert main(["recalibrate", "--bundle", str(bundle), "--rows", str(tmp_path / "rows.jsonl"),
                 "--out", str(tmp_path / "from-rows"), *common]) == 0
    from_rows = json.loads(capsys.readouterr().out)
    assert main(["recalibrate", "--bundle", str(bundle), "--db", str(tmp_path / "fleet.db"),
                 "--out", str(tmp_path / "from-db"), *common]) == 0
    from_db = json.loads(capsys.readouterr().out)
    assert from_db["chosen"] == from_rows["chosen"] and from_db["rows"] == from_rows["rows"]


@pytest.mark.slow
@pytest.mark.broker
def test_the_fleet_loop_recalibrates_with_the_devices_own_audit_fraction(
        toy_bundle: tuple[Path, Manifest], mosquitto: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The README's flow: a device audits 30% of its local decisions (not the default 2%),
    drains through a real mosquitto into the store; ``recalibrate --db`` without
    ``--audit-fraction`` picks what it picks with the right fraction (each record carries it)."""
    bundle, manifest = toy_bundle
    store = FleetStore(tmp_path / "fleet.db")
    ingest = StoreIngest(HpcInference.load(bundle), store, mosquitto.url, client_id="ingest")
    outbox = Outbox(tmp_path / "outbox")
    # no cloud worker answers here: the device decides offline (the gate reads every sensor
    # the HPC needs, so its escalations are labelled too), then drains like `edge drain`
    rt = EdgeRuntime.load(bundle, operating_point="gate", outbox=outbox, device_id="dev1",
                          audit=AuditPolicy(fraction=0.3, seed=1))
    for x in np.random.default_rng(2).normal(size=(1500, 3)).astype(np.float32) + 0.8:
        rt.predict_row(x)
    rt.close()
    uplink = MqttUplink(mosquitto.url, "dev1").start()
    drainer = OutboxDrainer(outbox, uplink, "dev1", rate_per_s=2000, ack_timeout_s=2.0)
    try:
        ingest.start()
        assert uplink.wait_connected(10.0), uplink.last_error
        assert drainer.drain(60.0), drainer.counters
    finally:
        uplink.close()
        ingest.stop()
    rows = store.labelled_rows(bundle_id=manifest.bundle_id)
    store.close()
    assert {r.audit_fraction for r in rows} == {0.3} and any(r.kind == "audit" for r in rows)
    chosen = {}
    for name, extra in (("stored", []), ("right", ["--audit-fraction", "0.3"]),
                        ("default", ["--audit-fraction", "0.02"])):
        assert main(["recalibrate", "--bundle", str(bundle), "--db", str(tmp_path / "fleet.db"),
                     "--out", str(tmp_path / name), "--json", *extra]) == 0
        chosen[name] = json.loads(capsys.readouterr().out)
    assert chosen["stored"]["chosen"] == chosen["right"]["chosen"]
    assert chosen["stored"]["audit_fractions"] == {"stored": len(
        [r for r in rows if r.kind == "audit"]), "assumed": 0}
    # a stored fraction is never overridden: --audit-fraction 0.02 changes nothing either
    assert chosen["default"]["chosen"] == chosen["stored"]["chosen"]
    # ... where the fraction the old code assumed picks another point on these rows
    assumed = [replace(r, audit_fraction=None) for r in rows]
    write_rows(tmp_path / "old.jsonl", assumed)
    assert main(["recalibrate", "--bundle", str(bundle), "--rows", str(tmp_path / "old.jsonl"),
                 "--out", str(tmp_path / "old"), "--json", "--audit-fraction", "0.02"]) == 0
    assert json.loads(capsys.readouterr().out)["chosen"] != chosen["right"]["chosen"]
    assert main(["recalibrate", "--bundle", str(bundle), "--rows", str(tmp_path / "old.jsonl"),
                 "--out", str(tmp_path / "none")]) == 2
    assert "carry no audit fraction" in capsys.readouterr().err
