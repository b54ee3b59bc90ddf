"""The fleet view in Prometheus: ``cloud serve --metrics-port P`` (prometheus-client).

A collector reads, at each scrape, what the running parts already count: the worker's
``stats()`` (requests, shed requests), the latest telemetry of every device (decisions,
escalations, degraded answers, audits, by device and bundle) and the fleet store (records,
audit agreement, drift alarms, records refused over a device's row quota). Service times and batch sizes are histograms fed as the
worker records them (``ServiceStats.observer``). Nothing here changes how a request is served.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, get_args

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from adaptedge.cloud.fleet.drift import Stream
from adaptedge.cloud.fleet.store import FleetStore

DRIFT_STREAMS: tuple[str, ...] = get_args(Stream)
"""The drift monitor's streams: ``adaptedge_drift_alarms`` has one series per device, bundle
and stream, zero until its first alarm."""

LATENCY_BUCKETS_MS: Final = (0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)
BATCH_BUCKETS: Final = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEVICE_COUNTERS: Final = {
    "decisions": "decisions made",
    "escalations": "decisions the gate sent to the cloud",
    "decisions_degraded": "decisions answered locally because the cloud could not",
    "audits": "local decisions audited (kept for an HPC label)",
    "audit_cost": "what the audits cost beyond the decisions (scalar cost units)",
}
SHED_CODES: Final = ("overloaded", "expired")


class ServiceObserver:
    """Histograms of the worker's service times and batch sizes (``ServiceStats.observer``)."""

    def __init__(self, registry: CollectorRegistry, bundle_id: str) -> None:
        self.bundle_id = bundle_id
        self.latency = Histogram("adaptedge_cloud_service_ms", "time from a request's arrival "
                                 "to its reply being written (ms)", ["bundle"],
                                 buckets=LATENCY_BUCKETS_MS, registry=registry)
        self.batch = Histogram("adaptedge_cloud_batch_size", "requests per HPC call",
                               ["bundle"], buckets=BATCH_BUCKETS, registry=registry)

    def service_ms(self, values: list[float]) -> None:
        child = self.latency.labels(self.bundle_id)
        for value in values:
            child.observe(value)

    def batch_size(self, size: int) -> None:
        self.batch.labels(self.bundle_id).observe(size)


class FleetCollector(Collector):
    """Builds the per-scrape metrics from the parts' own counters."""

    def __init__(self, bundle_id: str, service_stats: Callable[[], Mapping[str, float]],
                 device_telemetry: Callable[[], Mapping[str, Mapping[str, float]]],
                 bundle_of: Mapping[str, str], store: FleetStore | None) -> None:
        self.bundle_id = bundle_id
        self.service_stats = service_stats
        self.device_telemetry = device_telemetry
        self.bundle_of = bundle_of
        self.store = store

    def collect(self) -> Iterator[Any]:
        stats = self.service_stats()
        received = CounterMetricFamily("adaptedge_cloud_requests", "requests the worker "
                                       "received", labels=["bundle"])
        received.add_metric([self.bundle_id], stats.get("received", 0.0))
        yield received
        shed = CounterMetricFamily("adaptedge_cloud_shed", "requests answered with an error "
                                   "instead of the HPC because they could not be served in time",
                                   labels=["bundle", "reason"])
        for code in SHED_CODES:
            shed.add_metric([self.bundle_id, code], stats.get(f"error.{code}", 0.0))
        yield shed
        families = {name: CounterMetricFamily(f"adaptedge_device_{name}", help_text,
                                              labels=["device", "bundle"])
                    for name, help_text in DEVICE_COUNTERS.items()}
        for device, counters in sorted(self.device_telemetry().items()):
            bundle = self.bundle_of.get(device, self.bundle_id)
            for name, family in families.items():
                value = counters.get(name)
                if value is not None and math.isfinite(value):
                    family.add_metric([device, bundle], value)
        yield from families.values()
        if self.store is not None:
            yield from self._from_store(self.store)

    def _from_store(self, store: FleetStore) -> Iterator[Any]:
        """Every (device, bundle) with stored records has an alarm series per drift stream,
        zero until its first alarm (a dashboard or ``grep`` finds it from the start)."""
        records = CounterMetricFamily("adaptedge_store_records", "records stored", labels=[
            "device", "bundle", "kind"])
        audits = GaugeMetricFamily("adaptedge_audit_labelled", "audited decisions the HPC "
                                   "labelled", labels=["device", "bundle"])
        agreement = GaugeMetricFamily("adaptedge_audit_agreement", "fraction of labelled audits "
                                      "where the local answer equals the HPC's",
                                      labels=["device", "bundle"])
        alarms = CounterMetricFamily("adaptedge_drift_alarms", "drift alarms raised",
                                     labels=["device", "bundle", "metric"])
        for device, bundle, kind, n, labelled, same in store.tallies():
            records.add_metric([device, bundle, kind], n)
            if kind == "audit" and labelled:
                audits.add_metric([device, bundle], labelled)
                agreement.add_metric([device, bundle], same / labelled)
        pairs = {(device, bundle) for device, bundle, *_ in store.tallies()}
        fired = {(device, bundle, stream): 0 for device, bundle in pairs
                 for stream in DRIFT_STREAMS}
        for alarm in store.alarms():
            k = (alarm.device, alarm.bundle_id, alarm.metric)
            fired[k] = fired.get(k, 0) + 1
        for key, n in sorted(fired.items()):
            alarms.add_metric(list(key), n)
        refused = CounterMetricFamily("adaptedge_store_quota_refused", "records refused because "
                                      "their device was past its row quota", labels=["device"])
        for device, (n, _) in store.quota_refusals().items():
            refused.add_metric([device], n)
        yield from (records, audits, agreement, alarms, refused)


def serve_metrics(port: int, collector: FleetCollector, registry: CollectorRegistry,
                  host: str = "127.0.0.1") -> Any:
    """Start the HTTP endpoint (``/metrics``) on ``host:port`` in a daemon thread; returns
    the server (``shutdown()`` stops it)."""
    registry.register(collector)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server
