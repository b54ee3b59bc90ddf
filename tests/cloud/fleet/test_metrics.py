"""``adaptedge_drift_alarms`` is exported for every device with stored records: zero per drift
stream until an alarm, then the count (a dashboard or ``grep`` finds it at once)."""

from __future__ import annotations

from pathlib import Path

from adaptedge.cloud.fleet.metrics import DRIFT_STREAMS, FleetCollector
from adaptedge.cloud.fleet.store import FleetStore
from adaptedge.cloud.fleet.store.fleet_store import NewRecord


def _alarms(collector: FleetCollector) -> dict[tuple[str, str, str], float]:
    family = next(f for f in collector.collect() if f.name == "adaptedge_drift_alarms")
    return {(s.labels["device"], s.labels["bundle"], s.labels["metric"]): s.value
            for s in family.samples if s.name.endswith("_total")}


def test_drift_alarms_are_zero_before_the_first_and_count_after(tmp_path: Path) -> None:
    with FleetStore(tmp_path / "fleet.db") as store:
        collector = FleetCollector("b1", dict, dict, {}, store)
        assert _alarms(collector) == {}  # no device yet
        store.add_record(NewRecord("dev1", 1, b"d" * 16, "b1", "escalated", 0, b"", b"", 1,
                                   1, None, 1.0, 1.0))
        assert set(DRIFT_STREAMS) == {"escalation", "agreement"}
        assert _alarms(collector) == {("dev1", "b1", s): 0.0 for s in DRIFT_STREAMS}
        store.add_alarm("dev1", "b1", 0, "agreement", "test alarm", 1.0)
        assert _alarms(collector) == {("dev1", "b1", "escalation"): 0.0,
                                      ("dev1", "b1", "agreement"): 1.0}
