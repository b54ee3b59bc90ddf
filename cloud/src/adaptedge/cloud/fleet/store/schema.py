"""The fleet store's tables and their versioned migrations (SQLAlchemy Core).

``schema_version`` holds one row: the number of migration steps applied. ``MIGRATIONS`` are
the steps in order; opening a store applies the ones not applied yet, each in its own
transaction together with the version bump, so a store is always at a whole step. A store
newer than this code (a later version) is refused rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    select,
    text,
)

from adaptedge.cloud.errors import CloudError


class StoreError(CloudError):
    """The fleet store cannot be opened or written (the message says what to fix)."""


@dataclass(frozen=True)
class Tables:
    metadata: MetaData
    version: Table
    records: Table
    telemetry: Table
    alarms: Table
    quota: Table


def tables(schema: str | None = None) -> Tables:
    """The table definitions, in database ``schema`` (PostgreSQL) or the default one."""
    md = MetaData(schema=schema)
    version = Table("schema_version", md, Column("version", Integer, nullable=False))
    records = Table("records", md, *_record_columns(),
                    Column("audit_fraction", Float, nullable=True),  # step 4
                    Column("hpc_value", Float, nullable=True),  # step 5 (regression)
                    Column("local_value", Float, nullable=True),  # step 5 (regression)
                    UniqueConstraint("device", "request_id", "digest", name="records_once"))
    telemetry = Table(
        "telemetry", md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("device", String(128), nullable=False),
        Column("sent_at", Float, nullable=False),
        Column("received_at", Float, nullable=False),
        Column("counters", Text, nullable=False),  # JSON object name -> number
    )
    alarms = Table(
        "alarms", md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("device", String(128), nullable=False),
        Column("bundle_id", String(128), nullable=False),
        Column("point", Integer, nullable=True),
        Column("metric", String(64), nullable=False),
        Column("detail", Text, nullable=False),
        Column("at", Float, nullable=False),
    )
    quota = Table(
        "device_quota", md,
        Column("device", String(128), primary_key=True),
        Column("window_start", Float, nullable=False),  # the current quota window
        Column("stored", Integer, nullable=False),  # records stored in that window
        Column("refused", BigInteger, nullable=False),  # records refused over quota, ever
        Column("last_refused_at", Float, nullable=True),
    )
    return Tables(md, version, records, telemetry, alarms, quota)


def _record_columns() -> list[Column[Any]]:
    """The records table's columns as step 1 created them (later steps add columns)."""
    return [
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("device", String(128), nullable=False),
        Column("request_id", BigInteger, nullable=False),  # the u64 id as a signed i64
        Column("digest", LargeBinary(16), nullable=False),
        Column("bundle_id", String(128), nullable=False),
        Column("kind", String(16), nullable=False),
        Column("point", Integer, nullable=True),
        Column("features", LargeBinary, nullable=False),  # float32 little-endian
        Column("mask", LargeBinary, nullable=False),  # numpy.packbits, little bit order
        Column("local_label", Integer, nullable=True),
        Column("hpc_label", Integer, nullable=True),
        Column("label_error", String(64), nullable=True),
        Column("sent_at", Float, nullable=False),
        Column("received_at", Float, nullable=False),
    ]


def _v1(conn: Connection, t: Tables) -> None:
    Table(t.records.name, MetaData(schema=t.metadata.schema), *_record_columns(),
          UniqueConstraint("device", "request_id", "digest", name="records_once")).create(conn)


def _v2(conn: Connection, t: Tables) -> None:
    t.telemetry.create(conn)
    Index("telemetry_by_device", t.telemetry.c.device, t.telemetry.c.received_at).create(conn)
    Index("records_by_bundle", t.records.c.bundle_id, t.records.c.device).create(conn)


def _v3(conn: Connection, t: Tables) -> None:
    t.alarms.create(conn)


def _v4(conn: Connection, t: Tables) -> None:
    """The audit fraction of every record (NULL in older rows) and the per-device quota."""
    table = conn.dialect.identifier_preparer.format_table(t.records)
    column = t.records.c.audit_fraction
    kind = column.type.compile(dialect=conn.dialect)
    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column.name} {kind}"))
    t.quota.create(conn)


def _v5(conn: Connection, t: Tables) -> None:
    """A regression row's values: the HPC's and the device's own (NULL in every other row)."""
    table = conn.dialect.identifier_preparer.format_table(t.records)
    for column in (t.records.c.hpc_value, t.records.c.local_value):
        kind = column.type.compile(dialect=conn.dialect)
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column.name} {kind}"))


MIGRATIONS: tuple[Callable[[Connection, Tables], None], ...] = (_v1, _v2, _v3, _v4, _v5)
"""Step i (from 0) takes the store from version i to i + 1: append, never edit."""
SCHEMA_VERSION = len(MIGRATIONS)


def current_version(conn: Connection, t: Tables) -> int:
    if not conn.dialect.has_table(conn, t.version.name, schema=t.metadata.schema):
        return 0
    value = conn.execute(select(t.version.c.version)).scalar()
    return int(value or 0)


def migrate(connect: Callable[[], Connection], t: Tables) -> int:
    """Apply the missing steps; the version now."""
    with connect() as conn, conn.begin():
        if not conn.dialect.has_table(conn, t.version.name, schema=t.metadata.schema):
            t.version.create(conn)
            conn.execute(t.version.insert().values(version=0))
    while True:
        with connect() as conn, conn.begin():
            version = current_version(conn, t)
            if version > SCHEMA_VERSION:
                raise StoreError(f"the fleet store is at schema version {version}, newer than "
                                 f"this adaptedge ({SCHEMA_VERSION}): upgrade adaptedge")
            if version == SCHEMA_VERSION:
                return version
            MIGRATIONS[version](conn, t)
            conn.execute(t.version.update().values(version=version + 1))
