"""The store is the contract between the fleet loop and recalibration: rows written to a
``FleetStore`` come back as the same ``LabelledRow``s, so ``recalibrate --db`` picks exactly
what ``recalibrate --rows`` picks from the same rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main
from adaptedge.cloud.fleet.store import FleetStore, NewRecord
from adaptedge.protocol import Manifest
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


def test_recalibrate_from_the_store_equals_from_rows(toy_bundle: tuple[Path, Manifest],
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bundle, manifest = toy_bundle
    rows, _, _ = _field(bundle, manifest, 1500, seed=5, shift=0.5)
    with FleetStore(tmp_path / "fleet.db") as store:
        assert all(store.add_records([_record(r) for r in rows]))
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
