"""The fleet store: labelled records, device telemetry and alarms in SQLite or PostgreSQL
(needs the ``fleet`` extra: ``pip install 'adaptedge[fleet]'``)."""

from __future__ import annotations

from adaptedge.cloud.fleet.store.fleet_store import (
    DEFAULT_DB,
    Alarm,
    FleetStore,
    NewRecord,
    Outcome,
    database_url,
)
from adaptedge.cloud.fleet.store.quota import RowQuota
from adaptedge.cloud.fleet.store.schema import SCHEMA_VERSION, StoreError

__all__ = ["DEFAULT_DB", "SCHEMA_VERSION", "Alarm", "FleetStore", "NewRecord", "Outcome",
           "RowQuota", "StoreError", "database_url"]
