"""``FleetStore`` on SQLite always and on PostgreSQL (127.0.0.1:5432) when one is reachable:
idempotent records, labelled rows, telemetry, alarms, versioned migrations."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from adaptedge.cloud.fleet.store import (
    SCHEMA_VERSION,
    FleetStore,
    NewRecord,
    StoreError,
    database_url,
)
from adaptedge.cloud.fleet.store.fleet_store import to_signed, to_unsigned
from adaptedge.cloud.fleet.store.schema import MIGRATIONS, migrate, tables
from adaptedge.protocol.features import pack_features
from tests.support.fleet import PG_ADMIN, postgres_unreachable


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FleetStore]:
    if request.param == "sqlite":
        with FleetStore(tmp_path / "fleet.db") as s:
            yield s
        return
    reason = postgres_unreachable()
    if reason is not None:
        pytest.skip(reason)
    schema = f"t_{uuid.uuid4().hex[:12]}"  # one schema per test, dropped after
    admin = create_engine(PG_ADMIN)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        with FleetStore("postgresql://postgres@127.0.0.1:5432/test", schema=schema) as s:
            yield s
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def record(rid: int, *, device: str = "dev1", kind: str = "audit", local: int | None = 1,
           hpc: int | None = 1, digest: bytes = b"d" * 16, at: float = 1.0,
           fraction: float | None = 0.05) -> NewRecord:
    values = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    features, mask = pack_features(values, np.array([True, False, True]))
    return NewRecord(device, rid, digest, "bundle-1", kind, 0, features, mask,  # type: ignore[arg-type]
                     local, hpc, None if hpc is not None else "missing_features", 0.5, at,
                     fraction)


def test_records_are_stored_once_per_key(store: FleetStore) -> None:
    big = (1 << 64) - 1  # request ids are u64 on the wire
    assert store.add_records([record(1), record(big), record(1)]) == [
        "stored", "stored", "duplicate"]
    assert store.add_record(record(1)) == "duplicate"  # a resend changes nothing
    assert store.add_record(record(1, digest=b"e" * 16)) == "stored"  # other content: its own row
    assert store.count_records() == 3 and store.count_records("dev2") == 0
    assert sorted(store.record_keys()) == sorted([
        ("dev1", 1, b"d" * 16), ("dev1", big, b"d" * 16), ("dev1", 1, b"e" * 16)])


def test_labelled_rows_follow_the_contract(store: FleetStore) -> None:
    store.add_records([record(1, at=2.0), record(2, kind="escalated", local=None, at=1.0),
                       record(3, hpc=None, at=3.0), record(4, device="dev2", local=0, at=4.0)])
    rows = store.labelled_rows()
    assert [r.request_id for r in rows] == [2, 1, 4]  # oldest first, unlabelled left out
    assert rows[0].kind == "escalated" and rows[0].local_label is None
    assert rows[1].features[0] == 0.5 and math.isnan(rows[1].features[1])
    assert rows[1].point == 0 and rows[1].hpc_label == 1 and rows[1].bundle_id == "bundle-1"
    assert rows[1].audit_fraction == 0.05  # the device's audit fraction travels with the row
    assert [r.request_id for r in store.labelled_rows(device="dev2")] == [4]
    assert store.labelled_rows(bundle_id="other") == []
    tallies = {(d, k): (n, lab, same) for d, _, k, n, lab, same in store.tallies()}
    assert tallies[("dev1", "audit")] == (2, 1, 1) and tallies[("dev2", "audit")] == (1, 1, 0)


def test_telemetry_and_alarms(store: FleetStore) -> None:
    store.add_telemetry("dev1", 1.0, {"decisions": 10.0, "p50": float("nan")}, 2.0)
    store.add_telemetry("dev1", 3.0, {"decisions": 20.0}, 4.0)
    assert [(d, at, c.get("decisions")) for d, at, c in store.telemetry()] == [
        ("dev1", 2.0, 10.0), ("dev1", 4.0, 20.0)]
    assert store.telemetry("dev1")[0][2]["p50"] is None  # NaN is stored as null
    store.add_alarm("dev1", "bundle-1", 2, "agreement", "audited agreement 0.61 < 0.80", 5.0)
    alarms = store.alarms()
    assert len(alarms) == 1 and alarms[0].point == 2 and alarms[0].metric == "agreement"
    assert store.alarms("dev2") == []


def test_migrations_are_ordered_and_reopening_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    with FleetStore(path) as first:
        assert first.version == SCHEMA_VERSION == len(MIGRATIONS)
        first.add_record(record(7))
    with FleetStore(f"sqlite:///{path}") as again:  # the same file as a URL
        assert again.version == SCHEMA_VERSION and again.count_records() == 1
        with again.engine.begin() as conn:  # a store written by a newer adaptedge
            conn.execute(again.t.version.update().values(version=SCHEMA_VERSION + 1))
    with pytest.raises(StoreError, match="newer than this adaptedge"):
        FleetStore(path)


def test_a_store_at_an_old_version_is_brought_up_to_date(tmp_path: Path) -> None:
    engine = create_engine(database_url(tmp_path / "old.db"))
    t = tables()
    with engine.begin() as conn:  # a store of the first version: records only
        t.version.create(conn)
        conn.execute(t.version.insert().values(version=1))
        MIGRATIONS[0](conn, t)
    engine.dispose()
    with FleetStore(tmp_path / "old.db") as s:
        assert s.version == SCHEMA_VERSION
        s.add_alarm("d", "b", None, "escalation_rate", "x", 1.0)  # table of a later step
        assert s.add_record(record(1, fraction=None)) == "stored"
        assert s.labelled_rows()[0].audit_fraction is None  # a row of an older device
    assert migrate(create_engine(database_url(tmp_path / "old.db")).connect, t) == SCHEMA_VERSION


def test_urls_and_ids() -> None:
    assert database_url("fleet.db") == "sqlite:///fleet.db"
    assert database_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert database_url(None) == "sqlite:///fleet.db"
    for rid in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
        assert to_unsigned(to_signed(rid)) == rid and -(1 << 63) <= to_signed(rid) < 1 << 63
    with pytest.raises(StoreError, match="SQLite and PostgreSQL"):
        FleetStore("mysql+pymysql://u@h/db")


def test_a_device_past_its_row_quota_is_refused_and_counted(tmp_path: Path) -> None:
    from adaptedge.cloud.fleet.store import RowQuota
    from adaptedge.cloud.fleet.view import device_status

    with FleetStore(tmp_path / "fleet.db", quota=RowQuota(max_rows=3, window_s=10.0)) as s:
        assert s.add_records([record(i, at=1.0 + i) for i in range(5)]) == [
            "stored", "stored", "stored", "over_quota", "over_quota"]
        assert s.add_record(record(0, at=6.0)) == "duplicate"  # a resend is no new row
        assert s.add_record(record(9, device="dev2", at=6.0)) == "stored"  # others unaffected
        assert s.add_record(record(5, at=12.0)) == "stored"  # the next window
        assert s.count_records("dev1") == 4
        assert s.quota_refusals() == {"dev1": (2, 5.0)}
        status = {e["device"]: e for e in device_status(s)}
        assert status["dev1"]["quota_refused"] == 2 and status["dev2"]["quota_refused"] == 0
    with pytest.raises(ValueError, match="max_rows >= 1"):
        RowQuota(max_rows=0)


def test_the_database_password_comes_from_a_file_never_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 31 item 6: ``--db postgresql://user:pass@...`` shows the password in the process
    list. ``--db-password-file`` (or libpq's PGPASSWORD / ~/.pgpass) keeps it off; a password
    left in the URL is warned about in one line."""
    from adaptedge.cli.main import main as cli
    from tests.support.fleet import postgres_database

    reason = postgres_unreachable()
    if reason is not None:
        pytest.skip(reason)
    secret = tmp_path / "db-password"
    secret.write_text("s3cret\n")
    with postgres_database() as url:
        with FleetStore(url, password="s3cret") as store:
            assert store.engine.url.password == "s3cret"
            assert "s3cret" not in store._shown()
        assert cli(["fleet", "status", "--db", url, "--db-password-file", str(secret)]) == 0
        assert "process list" not in capsys.readouterr().err
        in_url = url.replace("postgres@", "postgres:visible@")
        assert cli(["fleet", "status", "--db", in_url]) == 0
        err = capsys.readouterr().err
        assert err.count("process list") == 1 and "--db-password-file" in err
    assert cli(["fleet", "status", "--db", url, "--db-password-file",
                str(tmp_path / "missing")]) == 2
    assert "cannot read the password file" in capsys.readouterr().err


def test_regression_rows_carry_both_values(store: FleetStore) -> None:
    """Issue 33: a regression row stores the HPC's value and the device's own; audits are
    tallied as squared and absolute errors in the target's unit; a classification row beside
    it reads as before (no values)."""
    def valued(rid: int, kind: str, hpc: float | None, local: float | None) -> NewRecord:
        r = record(rid, kind=kind, local=None, hpc=None)
        return replace(r, hpc_value=hpc, local_value=local, label_error=None)

    store.add_records([valued(1, "audit", 10.0, 12.5), valued(2, "audit", -1.0, -2.0),
                       valued(3, "escalated", 4.0, 3.0), valued(4, "audit", 5.0, None),
                       valued(5, "audit", None, 1.0), record(6)])
    rows = {r.request_id: r for r in store.labelled_rows()}
    assert sorted(rows) == [1, 2, 3, 4, 6]  # row 5: the HPC gave no value
    assert (rows[1].hpc_value, rows[1].local_value, rows[1].hpc_label) == (10.0, 12.5, -1)
    assert rows[1].is_regression and rows[1].local_label is None
    assert rows[4].local_value is None  # the device sent no value
    assert (rows[6].hpc_label, rows[6].hpc_value, rows[6].local_value) == (1, None, None)
    assert not rows[6].is_regression
    tallies = {k: (n, sq, ab) for _, _, k, n, sq, ab in store.value_tallies()}
    assert tallies["audit"] == (2, 2.5 ** 2 + 1.0, 2.5 + 1.0)
    assert tallies["escalated"] == (1, 1.0, 1.0)


def test_a_version_4_store_gains_the_value_columns(tmp_path: Path) -> None:
    """A store written before regression (version 4) opens at the current version, its rows
    unchanged and without values."""
    engine = create_engine(database_url(tmp_path / "v4.db"))
    t = tables()
    with engine.begin() as conn:
        t.version.create(conn)
        conn.execute(t.version.insert().values(version=0))
    migrate_to = MIGRATIONS[:4]
    with engine.begin() as conn:
        for step, apply in enumerate(migrate_to):
            apply(conn, t)
            conn.execute(t.version.update().values(version=step + 1))
        conn.execute(text("INSERT INTO records (device, request_id, digest, bundle_id, kind, "
                          "point, features, mask, local_label, hpc_label, label_error, "
                          "sent_at, received_at, audit_fraction) VALUES ('dev1', 9, :d, 'b', "
                          "'audit', 0, :f, :m, 1, 0, NULL, 0.5, 2.0, 0.02)"),
                     {"d": b"d" * 16, "f": np.float32([1.5]).tobytes(), "m": b"\x01"})
    engine.dispose()
    with FleetStore(tmp_path / "v4.db") as s:
        assert s.version == SCHEMA_VERSION == 5
        (row,) = s.labelled_rows()
        assert (row.request_id, row.local_label, row.hpc_label, row.audit_fraction,
                row.features) == (9, 1, 0, 0.02, (1.5,))
        assert row.hpc_value is None and row.local_value is None and s.value_tallies() == []
