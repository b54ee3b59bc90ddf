"""The cloud's store-and-forward end: outbox records in, labelled by the HPC, stored, acknowledged.

``StoreIngest`` runs beside the ``CloudService`` with its own MQTT client (its own account in a
deployment with an ACL: client ids are bound to user names). It reads every device's ``store``
topic, labels each batch of records with one HPC call, commits them to the ``FleetStore`` and
only then publishes an acknowledgement per record on the device's ``stored`` topic (QoS 1).
A record already stored (a resend) is acknowledged ``duplicate`` without a second row; a record
the HPC cannot label (it lacks the HPC's sensors, e.g. an escalation made offline, or names
another bundle) is stored unlabelled with the reason. A record past its device's row quota
(``fleet.store.quota``) is acknowledged ``refused``, counted (``over_quota``) and logged. If the commit fails nothing is
acknowledged and the devices send again. It also writes device telemetry to the store (only
a device's own, ``cloud.telemetry``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.fleet.live_drift import LiveDrift
from adaptedge.cloud.fleet.store import FleetStore, NewRecord
from adaptedge.cloud.fleet.telemetry import TelemetryInbox
from adaptedge.cloud.service.inference import Reply
from adaptedge.cloud.transport.connection import (
    TlsFiles,
    connect,
    make_client,
    parse_broker_url,
    reconnect,
)
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.messages import (
    NO_LABEL,
    ErrorReply,
    InferenceReply,
    InferenceRequest,
    ValueReply,
)
from adaptedge.protocol.store_wire import (
    StoreAck,
    StoreRecord,
    decode_record,
    encode_ack,
    record_digest,
)
from adaptedge.protocol.topics import DEFAULT_PREFIX, parse, shared, topic, wildcard

_SUCCESS = MQTTErrorCode.MQTT_ERR_SUCCESS
MAX_BATCH = 256


class Labeller(Protocol):
    """What labels records: an ``HpcInference`` (one bundle) or a ``BundlePool`` (several).
    Give the ingest its own: neither may run batches from two threads at once."""

    bundle_id: str

    def handle_batch(self, requests: Sequence[InferenceRequest],
                     now: float | None = None) -> list[Reply]: ...


@dataclass(slots=True)
class _Incoming:
    device: str
    record: StoreRecord
    request: InferenceRequest
    digest: bytes
    received_at: float


class StoreIngest:
    """Labels and stores forwarded records. ``start()`` serves in a thread; ``stop()``."""

    def __init__(self, inference: Labeller, store: FleetStore, broker_url: str, *,
                 client_id: str, username: str | None = None, password: str | None = None,
                 tls: TlsFiles | None = None, prefix: str = DEFAULT_PREFIX,
                 group: str | None = None, logger: logging.Logger | None = None,
                 drift: LiveDrift | None = None) -> None:
        self.inference = inference
        self.drift = drift
        """Live drift alarms fed with every new labelled row and telemetry (``cloud.live_drift``)."""
        self.store = store
        self.prefix = prefix
        self.address = parse_broker_url(broker_url)
        self.log = logger or logging.getLogger("adaptedge.cloud.fleet.ingest")
        self.client_id = client_id
        store_filter, telemetry_filter = wildcard("store", prefix), wildcard("telemetry", prefix)
        if group is not None:
            store_filter, telemetry_filter = (shared(group, store_filter),
                                              shared(group, telemetry_filter))
        self._filters = (store_filter, telemetry_filter)
        self._client = make_client(client_id, username=username, password=password, tls=tls,
                                   use_tls=tls is not None or self.address.tls)
        self._client.message_callback_add(wildcard("store", prefix), self._on_record)
        self._client.message_callback_add(wildcard("telemetry", prefix), self._on_telemetry)
        self._client.on_connect = self._on_connect
        self._pending: list[_Incoming] = []
        self.telemetry = TelemetryInbox(prefix)
        self.bundle_of: dict[str, str] = {}
        """The bundle of each device's latest record (the fleet view's label)."""
        self.counts = {"records": 0, "stored": 0, "duplicates": 0, "refused": 0,
                       "unlabelled": 0, "commit_failures": 0, "telemetry_stored": 0,
                       "over_quota": 0}
        self._quota_logged: dict[str, float] = {}
        self._stopping = threading.Event()
        self._runner: threading.Thread | None = None
        self.failure: str | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> StoreIngest:
        connect(self._client, self.address)
        self._subscribe()
        self._runner = threading.Thread(target=self._serve, daemon=True,
                                        name=f"ingest[{self.client_id}]")
        self._runner.start()
        self.log.info("store ingest %s labelling records of bundle %s into %s", self.client_id,
                      self.inference.bundle_id, self.store.dialect)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping.set()
        if self._runner is not None:
            self._runner.join(timeout_s)

    @property
    def running(self) -> bool:
        return self._runner is not None and self._runner.is_alive()

    def _subscribe(self) -> None:
        for f in self._filters:
            self._client.subscribe(f, qos=1)

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any,
                    props: Any) -> None:
        if not reason.is_failure:
            self._subscribe()  # clean session: subscriptions do not survive a reconnect

    def _serve(self) -> None:
        client = self._client
        try:
            while not self._stopping.is_set():
                rc = client.loop(0.05)
                self.flush()
                if rc != _SUCCESS and not self._stopping.is_set():
                    self.log.warning("store ingest lost the broker (%s); reconnecting",
                                     mqtt.error_string(rc))
                    if reconnect(client, self.address, self._stopping, self.log):
                        self._subscribe()  # clean session: subscribe again
            self.flush()
            for _ in range(20):  # let the last acknowledgements leave
                if client.loop(0.01) != _SUCCESS:
                    break
        except CloudError as exc:
            self.failure = str(exc)
            self.log.error("store ingest stops: %s", exc)
        finally:
            client.disconnect()

    # -- messages (the serving thread) ---------------------------------------------------------
    def _on_record(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        try:
            self._accept(message)
        except Exception:  # never stop on one message
            self.log.exception("store ingest failed on a message; continuing")

    def _accept(self, message: mqtt.MQTTMessage) -> None:
        if message.retain:
            return
        try:
            device = parse(message.topic, self.prefix).device
        except (ProtocolError, UnicodeDecodeError):
            return
        self.counts["records"] += 1
        try:
            record, request = decode_record(message.payload)
        except ProtocolError as exc:
            self.counts["refused"] += 1
            self.log.warning("refused a record from %s: %s", device, exc)
            return  # nothing to name in an acknowledgement: the device sets it aside at last
        digest = record_digest(record.request)
        if request.device != device:
            self._ack(device, request.request_id, digest, "refused",
                      f"the record names device {request.device!r}; send your own records")
            self.counts["refused"] += 1
            return
        self._pending.append(_Incoming(device, record, request, digest, time.time()))
        if len(self._pending) >= MAX_BATCH:
            self.flush()

    def _on_telemetry(self, client: mqtt.Client, userdata: Any,
                      message: mqtt.MQTTMessage) -> None:
        try:
            if message.retain:
                return
            accepted = self.telemetry.accept(message.topic, message.payload)
            if accepted is None or "decisions" not in accepted.counters:
                return  # not a device's counters (a worker's stats, a probe)
            self.store.add_telemetry(accepted.source, accepted.sent_at, accepted.counters,
                                     time.time())
            self.counts["telemetry_stored"] += 1
            if self.drift is not None:
                self.drift.on_telemetry(accepted.source, accepted.counters)
        except Exception:
            self.log.exception("store ingest could not store telemetry; continuing")

    def flush(self) -> None:
        """Label, commit, then acknowledge the records received so far."""
        batch, self._pending = self._pending, []
        if not batch:
            return
        labels = self._label([b.request for b in batch])
        rows = [NewRecord(
            device=b.device, request_id=b.request.request_id, digest=b.digest,
            bundle_id=b.request.bundle_id, kind=b.record.kind, point=b.record.point,
            features=b.request.features, mask=b.request.mask,
            local_label=None if b.request.local_label == NO_LABEL else b.request.local_label,
            hpc_label=label, label_error=error, sent_at=b.request.sent_at,
            received_at=b.received_at, audit_fraction=b.record.audit_fraction,
            hpc_value=value, local_value=b.record.local_value)
            for b, (label, value, error) in zip(batch, labels, strict=True)]
        try:
            outcomes = self.store.add_records(rows)
        except CloudError as exc:
            self.counts["commit_failures"] += 1
            self.log.error("could not store %d records (%s); not acknowledged, the devices "
                           "will send them again", len(rows), exc)
            return
        for b, outcome, row in zip(batch, outcomes, rows, strict=True):
            if outcome == "over_quota":
                self._over_quota(b)
                continue
            new = outcome == "stored"
            self.counts["stored" if new else "duplicates"] += 1
            self.counts["unlabelled"] += new and not row.labelled
            self.bundle_of[b.device] = b.request.bundle_id
            self._ack(b.device, b.request.request_id, b.digest, outcome)
        if self.drift is not None:  # after the acknowledgements: an alarm never delays them
            self._watch([row for row, outcome in zip(rows, outcomes, strict=True)
                         if outcome == "stored"])

    def _over_quota(self, b: _Incoming) -> None:
        """Refuse a record past its device's row quota: counted, logged (once a minute per
        device), acknowledged ``refused`` so the device drops it."""
        self.counts["over_quota"] += 1
        quota = self.store.quota
        assert quota is not None
        self._ack(b.device, b.request.request_id, b.digest, "refused",
                  f"over the row quota of {quota.max_rows} records per {quota.window_s:g} s "
                  "per device; not stored")
        last = self._quota_logged.get(b.device)
        if last is None or b.received_at - last >= 60.0:
            self._quota_logged[b.device] = b.received_at
            self.log.warning("device %s is past its row quota (%d records per %g s): its "
                             "further records are refused (%d refused by this ingest so far)",
                             b.device, quota.max_rows, quota.window_s, self.counts["over_quota"])

    def _watch(self, rows: list[NewRecord]) -> None:
        assert self.drift is not None
        try:
            for r in rows:
                self.drift.on_record(r.device, r.bundle_id, r.kind, r.point, r.local_label,
                                     r.hpc_label)
        except Exception:  # the monitor must never stop the store
            self.log.exception("the drift monitor failed on stored rows; continuing")

    def _label(self, requests: list[InferenceRequest]
               ) -> list[tuple[int | None, float | None, str | None]]:
        """Per request: the HPC's label, or a regression HPC's value, or why neither."""
        try:
            replies = self.inference.handle_batch(requests)
        except Exception as exc:  # the HPC must not stop the store
            self.log.exception("the HPC failed to label a batch")
            return [(None, None, f"internal: {type(exc).__name__}")] * len(requests)
        return [(r.label, None, None) if isinstance(r, InferenceReply)
                else (None, r.value, None) if isinstance(r, ValueReply)
                else (None, None, r.code if isinstance(r, ErrorReply) else None)
                for r in replies]

    def _ack(self, device: str, request_id: int, digest: bytes, status: Any,
             message: str = "") -> None:
        ack = StoreAck(device, request_id, digest, status, message)
        self._client.publish(topic(device, "stored", self.prefix), encode_ack(ack), qos=1)
