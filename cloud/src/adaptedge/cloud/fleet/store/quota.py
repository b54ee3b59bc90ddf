"""The per-device row quota of the fleet store: no device stores more than ``max_rows`` records
in one window of ``window_s`` seconds.

A device chooses what it sends, so without a bound one device could fill the store (and
outweigh the fleet in what is computed from it). Windows are fixed, aligned on multiples of
``window_s`` of the records' arrival time; a record past the quota is not stored, the device's
``refused`` tally (kept for good, with the time of the last refusal) counts it and the cloud
acknowledges it ``refused`` so the device drops it. The default is above what an honest device
can send: ``edge run``/``edge drain`` forward at most 50 records/s by default (``--drain-rate``),
180,000 an hour, under the default quota of 200,000 an hour.

``QuotaLedger`` keeps the counts of one transaction: it reads (and on PostgreSQL locks) the
batch's devices' rows first and writes them back before the commit, so two ingest processes
sharing one database count every record once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from adaptedge.cloud.fleet.store.schema import Tables

DEFAULT_MAX_ROWS: Final = 200_000
DEFAULT_WINDOW_S: Final = 3600.0


@dataclass(frozen=True)
class RowQuota:
    """At most ``max_rows`` records per device per window of ``window_s`` seconds."""

    max_rows: int = DEFAULT_MAX_ROWS
    window_s: float = DEFAULT_WINDOW_S

    def __post_init__(self) -> None:
        if self.max_rows < 1 or not (math.isfinite(self.window_s) and self.window_s > 0):
            raise ValueError(f"a row quota needs max_rows >= 1 and a positive window, got "
                             f"{self.max_rows} rows per {self.window_s} s")

    def window(self, at: float) -> float:
        """The start of the window holding time ``at``."""
        return math.floor(at / self.window_s) * self.window_s


@dataclass(slots=True)
class _Device:
    window_start: float
    stored: int
    refused: int
    last_refused_at: float | None
    changed: bool = False


class QuotaLedger:
    """The quota counts of the devices of one batch, inside one transaction."""

    def __init__(self, conn: Connection, t: Tables, quota: RowQuota, devices: Iterable[str],
                 now: float) -> None:
        self.quota = quota
        self._t = t
        names = sorted(set(devices))
        self._devices: dict[str, _Device] = {}
        if not names:
            return
        insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
        start = quota.window(now)
        conn.execute(insert(t.quota).values([
            {"device": d, "window_start": start, "stored": 0, "refused": 0} for d in names
        ]).on_conflict_do_nothing(index_elements=["device"]))
        c = t.quota.c
        rows = conn.execute(select(c.device, c.window_start, c.stored, c.refused,
                                   c.last_refused_at).where(c.device.in_(names))
                            .order_by(c.device).with_for_update()).all()
        for device, window_start, stored, refused, last in rows:
            self._devices[device] = _Device(float(window_start), int(stored), int(refused),
                                            None if last is None else float(last))

    def _state(self, device: str, at: float) -> _Device:
        state = self._devices[device]
        start = self.quota.window(at)
        if start > state.window_start:  # a new window: the count starts again
            state.window_start, state.stored, state.changed = start, 0, True
        return state

    def has_room(self, device: str, at: float) -> bool:
        return self._state(device, at).stored < self.quota.max_rows

    def stored(self, device: str, at: float) -> None:
        state = self._state(device, at)
        state.stored += 1
        state.changed = True

    def refused(self, device: str, at: float) -> None:
        state = self._state(device, at)
        state.refused += 1
        state.last_refused_at = at
        state.changed = True

    def save(self, conn: Connection) -> None:
        """Write the changed counts back (before the transaction commits)."""
        changed: list[dict[str, Any]] = [
            {"d": device, "w": s.window_start, "s": s.stored, "r": s.refused,
             "l": s.last_refused_at} for device, s in self._devices.items() if s.changed]
        if not changed:
            return
        c = self._t.quota.c
        conn.execute(self._t.quota.update().where(c.device == bindparam("d")).values(
            window_start=bindparam("w"), stored=bindparam("s"), refused=bindparam("r"),
            last_refused_at=bindparam("l")), changed)


DEFAULT_QUOTA: Final = RowQuota()
"""What ``FleetStore`` and ``cloud serve --db`` apply unless told otherwise."""
