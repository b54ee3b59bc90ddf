"""``FleetStore``: labelled records, device telemetry and drift alarms in one SQL database.

SQLite for one machine (``sqlite:///fleet.db`` or a plain path), PostgreSQL for a fleet
(``postgresql://user@host/db``, driver psycopg 3). Each record is stored once per
``(device, request id, digest)`` (a unique key; a second copy is reported as a duplicate and
changes nothing), and ``add_records`` returns only after the rows are committed: the cloud
acknowledges a record to its device only then. A device past its row quota
(``store.quota.RowQuota``) has its further records refused and counted (``quota_refusals``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
from sqlalchemy import Connection, Engine, case, create_engine, event, func, make_url, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError

from adaptedge.cloud.fleet.store.quota import DEFAULT_QUOTA, QuotaLedger, RowQuota
from adaptedge.cloud.fleet.store.schema import StoreError, migrate, tables
from adaptedge.protocol.fleet_rows import ROW_KINDS, LabelledRow, RowKind
from adaptedge.protocol.messages import NO_LABEL

DEFAULT_DB: Final = "fleet.db"
"""The SQLite file ``cloud serve`` uses when ``--db`` is not given (in the current folder)."""
_U64: Final = 1 << 64
Outcome = Literal["stored", "duplicate", "over_quota"]
"""What became of a record: committed now, already held (a resend), or refused because its
device is past its row quota."""


def database_url(value: str | os.PathLike[str] | None) -> str:
    """A SQLAlchemy URL from ``--db``: a URL as is, a plain path as a SQLite file."""
    value = os.fspath(value or DEFAULT_DB)
    if "://" in value:
        if value.startswith(("postgresql://", "postgres://")):
            return "postgresql+psycopg://" + value.split("://", 1)[1]
        return value
    return f"sqlite:///{Path(value).expanduser()}"


def to_signed(request_id: int) -> int:
    """A u64 request id as the signed 64-bit integer the column holds."""
    return request_id - _U64 if request_id >= 1 << 63 else request_id


def to_unsigned(value: int) -> int:
    return value + _U64 if value < 0 else value


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to store (``hpc_label`` None with ``label_error`` when the HPC could not;
    ``audit_fraction`` None when the device did not send it). A regression record has the
    HPC's ``hpc_value`` (``hpc_label`` None) and the device's ``local_value``."""

    device: str
    request_id: int
    digest: bytes
    bundle_id: str
    kind: RowKind
    point: int | None
    features: bytes
    mask: bytes
    local_label: int | None
    hpc_label: int | None
    label_error: str | None
    sent_at: float
    received_at: float
    audit_fraction: float | None = None
    hpc_value: float | None = None
    local_value: float | None = None

    @property
    def labelled(self) -> bool:
        """The HPC answered it: a label, or a regression HPC's value."""
        return self.hpc_label is not None or self.hpc_value is not None


@dataclass(frozen=True, slots=True)
class Alarm:
    device: str
    bundle_id: str
    point: int | None
    metric: str
    detail: str
    at: float


def _sqlite_pragmas(dbapi_connection: Any, record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers (fleet status) never block the writer
    cursor.execute("PRAGMA synchronous=FULL")  # a committed row survives a power cut
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


class FleetStore:
    """The fleet's database. Open with a URL (``database_url``); ``schema`` puts the tables
    in a PostgreSQL schema of that name (it must exist); ``quota``: each device's row quota
    (None: unbounded); ``password`` (e.g. read from a file) replaces the URL's, so it need not
    be on a command line."""

    def __init__(self, url: str | os.PathLike[str] | None = None, *,
                 schema: str | None = None, quota: RowQuota | None = DEFAULT_QUOTA,
                 password: str | None = None) -> None:
        self.url = database_url(url)
        self.quota = quota
        parsed = make_url(self.url)
        backend = parsed.get_backend_name()
        if backend not in ("sqlite", "postgresql"):
            raise StoreError(f"the fleet store supports SQLite and PostgreSQL, not {backend} "
                             f"({url}): give --db sqlite:///FILE, a file path or "
                             "postgresql://USER@HOST/DB")
        try:
            self.engine: Engine = create_engine(  # a password from a file, not the URL
                parsed if password is None else parsed.set(password=password),
                pool_pre_ping=True)
        except (SQLAlchemyError, ImportError, ValueError) as exc:
            raise StoreError(f"cannot open the fleet store {url!r}: {exc} (give --db "
                             "sqlite:///FILE, a file path or postgresql://USER@HOST/DB)") from exc
        self.dialect = self.engine.dialect.name
        if self.dialect == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self.t = tables(schema)
        try:
            self.version = migrate(self.engine.connect, self.t)
        except StoreError:
            self.engine.dispose()
            raise
        except SQLAlchemyError as exc:
            self.engine.dispose()
            raise StoreError(f"cannot open the fleet store at {self._shown()}: "
                             f"{exc.__class__.__name__}: {str(exc).splitlines()[0]}") from exc

    def _shown(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> FleetStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- records -------------------------------------------------------------------------------
    def add_records(self, records: Sequence[NewRecord]) -> list[Outcome]:
        """Insert the records in one transaction, each at most once; for each, ``stored``
        when it was new, ``duplicate`` when that key was already stored, ``over_quota`` when
        its device is past its quota (counted). Returns after the commit."""
        out: list[Outcome] = []
        try:
            with self.engine.begin() as conn:
                ledger = None if self.quota is None or not records else QuotaLedger(
                    conn, self.t, self.quota, (r.device for r in records),
                    max(r.received_at for r in records))
                for r in records:
                    if r.kind not in ROW_KINDS:
                        raise StoreError(f"record kind {r.kind!r} is not one of {ROW_KINDS}")
                    if ledger is not None and not ledger.has_room(r.device, r.received_at):
                        if self._held(conn, r):
                            out.append("duplicate")
                        else:
                            ledger.refused(r.device, r.received_at)
                            out.append("over_quota")
                        continue
                    new = self._insert(conn, r)
                    if new and ledger is not None:
                        ledger.stored(r.device, r.received_at)
                    out.append("stored" if new else "duplicate")
                if ledger is not None:
                    ledger.save(conn)
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot write records to {self._shown()}: "
                             f"{str(exc).splitlines()[0]}") from exc
        return out

    def add_record(self, record: NewRecord) -> Outcome:
        """Insert one record once (committed when this returns)."""
        return self.add_records([record])[0]

    def _insert(self, conn: Connection, r: NewRecord) -> bool:
        insert = pg_insert if self.dialect == "postgresql" else sqlite_insert
        table = self.t.records
        stmt = insert(table).values(
            device=r.device, request_id=to_signed(r.request_id), digest=r.digest,
            bundle_id=r.bundle_id, kind=r.kind, point=r.point, features=r.features,
            mask=r.mask, local_label=r.local_label, hpc_label=r.hpc_label,
            label_error=r.label_error, sent_at=r.sent_at, received_at=r.received_at,
            audit_fraction=r.audit_fraction, hpc_value=r.hpc_value, local_value=r.local_value,
        ).on_conflict_do_nothing(index_elements=["device", "request_id", "digest"]
                                 ).returning(table.c.id)
        return conn.execute(stmt).first() is not None

    def _held(self, conn: Connection, r: NewRecord) -> bool:
        c = self.t.records.c
        return conn.execute(select(c.id).where(
            c.device == r.device, c.request_id == to_signed(r.request_id),
            c.digest == r.digest)).first() is not None

    def quota_refusals(self) -> dict[str, tuple[int, float | None]]:
        """Per device that was ever refused over its quota: records refused, last time."""
        c = self.t.quota.c
        with self.engine.connect() as conn:
            rows = conn.execute(select(c.device, c.refused, c.last_refused_at).where(
                c.refused > 0).order_by(c.device)).all()
        return {d: (int(n), None if at is None else float(at)) for d, n, at in rows}

    def count_records(self, device: str | None = None) -> int:
        stmt = select(func.count()).select_from(self.t.records)
        if device is not None:
            stmt = stmt.where(self.t.records.c.device == device)
        with self.engine.connect() as conn:
            return int(conn.execute(stmt).scalar() or 0)

    def record_keys(self) -> list[tuple[str, int, bytes]]:
        """Every stored ``(device, request_id, digest)``, in insertion order."""
        c = self.t.records.c
        with self.engine.connect() as conn:
            rows = conn.execute(select(c.device, c.request_id, c.digest).order_by(c.id)).all()
        return [(d, to_unsigned(int(r)), bytes(g)) for d, r, g in rows]

    def labelled_rows(self, bundle_id: str | None = None,
                      device: str | None = None) -> list[LabelledRow]:
        """The rows the HPC labelled (a regression HPC: gave a value), oldest first; features
        not measured are NaN."""
        c = self.t.records.c
        stmt = select(c.device, c.bundle_id, c.request_id, c.kind, c.point, c.features, c.mask,
                      c.local_label, c.hpc_label, c.received_at, c.audit_fraction,
                      c.hpc_value, c.local_value).where(
            c.hpc_label.is_not(None) | c.hpc_value.is_not(None)).order_by(c.received_at, c.id)
        if bundle_id is not None:
            stmt = stmt.where(c.bundle_id == bundle_id)
        if device is not None:
            stmt = stmt.where(c.device == device)
        with self.engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return [LabelledRow(dev, bundle, to_unsigned(int(rid)), kind, point,
                            _features(bytes(feats), bytes(mask)), local,
                            NO_LABEL if hpc is None else int(hpc), float(at),
                            _float(fraction), _float(hpc_value), _float(local_value))
                for (dev, bundle, rid, kind, point, feats, mask, local, hpc, at, fraction,
                     hpc_value, local_value) in rows]

    def tallies(self) -> list[tuple[str, str, str, int, int, int]]:
        """Per ``(device, bundle, kind)``: records, those labelled, and labelled ones whose
        local label equals the HPC's."""
        c = self.t.records.c
        labelled = func.sum(case((c.hpc_label.is_not(None), 1), else_=0))
        same = func.sum(case((c.local_label == c.hpc_label, 1), else_=0))
        stmt = select(c.device, c.bundle_id, c.kind, func.count(), labelled, same).group_by(
            c.device, c.bundle_id, c.kind).order_by(c.device, c.bundle_id, c.kind)
        with self.engine.connect() as conn:
            return [(d, b, k, int(n), int(lab or 0), int(eq or 0))
                    for d, b, k, n, lab, eq in conn.execute(stmt)]

    def value_tallies(self) -> list[tuple[str, str, str, int, float, float]]:
        """Regression rows per ``(device, bundle, kind)`` holding both values: how many, the
        sum of squared and of absolute (device value - HPC value), in the target's unit."""
        c = self.t.records.c
        both = c.hpc_value.is_not(None) & c.local_value.is_not(None)
        diff = c.local_value - c.hpc_value
        stmt = select(c.device, c.bundle_id, c.kind, func.count(), func.sum(diff * diff),
                      func.sum(func.abs(diff))).where(both).group_by(
            c.device, c.bundle_id, c.kind).order_by(c.device, c.bundle_id, c.kind)
        with self.engine.connect() as conn:
            return [(d, b, k, int(n), float(sq or 0.0), float(ab or 0.0))
                    for d, b, k, n, sq, ab in conn.execute(stmt)]

    def record_summaries(self) -> list[dict[str, Any]]:
        """Light per-record facts for fleet views: device, bundle, kind, point, labels, time."""
        c = self.t.records.c
        stmt = select(c.device, c.bundle_id, c.kind, c.point, c.local_label, c.hpc_label,
                      c.received_at).order_by(c.received_at, c.id)
        with self.engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(stmt)]

    # -- telemetry -----------------------------------------------------------------------------
    def add_telemetry(self, device: str, sent_at: float, counters: Mapping[str, float],
                      received_at: float) -> None:
        text = json.dumps({k: (float(v) if math.isfinite(v) else None)
                           for k, v in counters.items()}, sort_keys=True)
        try:
            with self.engine.begin() as conn:
                conn.execute(self.t.telemetry.insert().values(
                    device=device, sent_at=sent_at, received_at=received_at, counters=text))
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot write telemetry to {self._shown()}: "
                             f"{str(exc).splitlines()[0]}") from exc

    def telemetry(self, device: str | None = None) -> list[tuple[str, float, dict[str, float]]]:
        """``(device, received_at, counters)`` rows, oldest first."""
        c = self.t.telemetry.c
        stmt = select(c.device, c.received_at, c.counters).order_by(c.received_at, c.id)
        if device is not None:
            stmt = stmt.where(c.device == device)
        with self.engine.connect() as conn:
            return [(d, float(at), json.loads(text)) for d, at, text in conn.execute(stmt)]

    # -- alarms --------------------------------------------------------------------------------
    def add_alarm(self, device: str, bundle_id: str, point: int | None, metric: str,
                  detail: str, at: float) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(self.t.alarms.insert().values(
                    device=device, bundle_id=bundle_id, point=point, metric=metric,
                    detail=detail, at=at))
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot write an alarm to {self._shown()}: "
                             f"{str(exc).splitlines()[0]}") from exc

    def alarms(self, device: str | None = None) -> list[Alarm]:
        c = self.t.alarms.c
        stmt = select(c.device, c.bundle_id, c.point, c.metric, c.detail, c.at).order_by(
            c.at, c.id)
        if device is not None:
            stmt = stmt.where(c.device == device)
        with self.engine.connect() as conn:
            return [Alarm(*row) for row in conn.execute(stmt)]


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _features(features: bytes, mask: bytes) -> tuple[float, ...]:
    values = np.frombuffer(features, dtype="<f4").astype(np.float64)
    measured = np.unpackbits(np.frombuffer(mask, dtype=np.uint8), bitorder="little",
                             count=values.size).astype(bool)
    return tuple(np.where(measured, values, np.nan).tolist())

