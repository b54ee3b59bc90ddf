"""``UpdateFollower``: a device takes signed bundle updates while it keeps answering.

It listens on the device's ``update`` topic (through the uplink's connection: brokers bind
client ids to device accounts, so a second connection would take the session over). For each
announcement, in a background thread, it

1. refuses a bundle it refused before, or whose announced version is not above the active
   one (no downgrade);
2. downloads the image (``edge.ota_download``: chunks over MQTT, resumable, or the URL) and
   checks its size and SHA-256 (a failed download is reported but not remembered: the next
   delivery of the announcement, e.g. after a reconnect, tries again and resumes);
3. unpacks it (``edge.bundle_slots``) and verifies every file hash and the signature against
   the trusted keys, and that the signed manifest carries the announced id and version;
4. loads it (a bundle that fails to load is rolled back: the device never left the old one)
   and swaps it in between two decisions (``edge.switchable``), on probation;
5. after probation keeps it (the previous bundle stays on disk) or has rolled it back.

Every step is reported as an ``UpdateStatus`` on the device's telemetry topic, retained, with
the reason of a refusal or rollback.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from adaptedge.edge.bundle_slots import BundleSlots, safe_id
from adaptedge.edge.errors import EdgeError
from adaptedge.edge.ota_download import ChunkDownload, DownloadError, fetch_url
from adaptedge.edge.runtime import EdgeRuntime
from adaptedge.edge.switchable import Probation, SwitchableRuntime, Verdict
from adaptedge.protocol.bundle import verify
from adaptedge.protocol.bundle_version import bundle_version
from adaptedge.protocol.errors import BundleError, ProtocolError
from adaptedge.protocol.ota import (
    ACTIVE,
    DOWNLOADING,
    PROBATION,
    REFUSED,
    ROLLED_BACK,
    ChunkReply,
    ChunkRequest,
    UpdateAnnouncement,
    UpdateStatus,
    decode_ota,
    encode_ota,
    reason_text,
)
from adaptedge.protocol.topics import DEFAULT_PREFIX, telemetry_topic, topic

log = logging.getLogger("edge.updates")


class Carrier(Protocol):
    """The connection updates travel on (``MqttUplink`` is one)."""

    def add_channel(self, topic: str, on_payload: Callable[[bytes, bool], None]) -> None: ...

    def publish(self, topic: str, payload: bytes, *, qos: int = 0,
                retain: bool = False) -> bool: ...


class Refusal(EdgeError):
    """An announced bundle that will not run here; the message is the reported reason."""


class UpdateFollower:
    """Follows the announcements of one device. ``start()`` it, ``close()`` it."""

    def __init__(self, holder: SwitchableRuntime, carrier: Carrier, slots: BundleSlots, *,
                 trust: Sequence[str | os.PathLike[str]], load: Callable[[Path], EdgeRuntime],
                 prefix: str = DEFAULT_PREFIX, window: int = 8, retry_s: float = 1.0,
                 max_tries: int = 50, download_timeout_s: float = 600.0) -> None:
        if not trust:
            raise EdgeError("following updates needs at least one trusted public key (--trust):"
                            " only signed bundles are taken over the air")
        self.holder, self.carrier, self.slots = holder, carrier, slots
        self.trust = list(trust)
        self._load = load
        self.device = holder.device_id
        self.prefix = prefix
        self._window, self._retry_s, self._timeout_s = window, retry_s, download_timeout_s
        self._max_tries = max_tries
        self._cond = threading.Condition()
        self._pending: UpdateAnnouncement | None = None
        self._verdicts: list[Verdict] = []
        self._download: ChunkDownload | None = None
        self._stop = threading.Event()
        self._runner: threading.Thread | None = None
        self._rollouts: dict[str, str] = {}
        self.statuses: list[UpdateStatus] = []
        """Every status reported, oldest first (bounded to the last 1000)."""
        self.bad_messages = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> UpdateFollower:
        self.holder.on_verdict = self._on_verdict
        self.carrier.add_channel(topic(self.device, "update", self.prefix), self._on_update)
        self.carrier.add_channel(topic(self.device, "chunk", self.prefix), self._on_chunk)
        self._runner = threading.Thread(target=self._run, daemon=True,
                                        name=f"edge[{self.device}].updates")
        self._runner.start()
        self.report(ACTIVE, self.holder.bundle_id)
        return self

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._runner is not None:
            self._runner.join(timeout=10)

    # -- network thread ----------------------------------------------------------------------
    def _on_update(self, payload: bytes, retained: bool) -> None:
        if not payload:
            return  # a withdrawn announcement
        try:
            message = decode_ota(payload)
        except ProtocolError as exc:
            self.bad_messages += 1
            log.warning("edge %s: dropped an undecodable announcement: %s", self.device, exc)
            return
        if type(message) is not UpdateAnnouncement:
            self.bad_messages += 1
            return
        with self._cond:
            self._pending = message  # the latest announcement wins
            self._cond.notify_all()

    def _on_chunk(self, payload: bytes, retained: bool) -> None:
        try:
            message = decode_ota(payload)
        except ProtocolError:
            self.bad_messages += 1
            return
        download = self._download
        if type(message) is ChunkReply and download is not None:
            download.on_reply(message)

    def _on_verdict(self, verdict: Verdict) -> None:  # a decision thread: hand it over
        with self._cond:
            self._verdicts.append(verdict)
            self._cond.notify_all()

    # -- the update thread -------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                while not (self._stop.is_set() or self._verdicts or self._pending):
                    self._cond.wait(0.5)
                verdicts, self._verdicts = self._verdicts, []
                ann, self._pending = self._pending, None
            for verdict in verdicts:
                self._settle(verdict)
            if ann is not None and not self._stop.is_set():
                try:
                    self._apply(ann)
                except Exception as exc:  # a bug must not kill the device's update thread
                    log.exception("edge %s: update of %s failed", self.device, ann.bundle_id)
                    self._refuse(ann, f"internal error: {exc}")

    def _apply(self, ann: UpdateAnnouncement) -> None:
        self._rollouts[ann.bundle_id] = ann.rollout
        if ann.bundle_id == self.holder.bundle_id:
            if not self.holder.on_probation:
                self.report(ACTIVE, ann.bundle_id)
            return
        if ann.bundle_id in self.slots.refused:
            return  # refused before, reported then; its retained announcement stays around
        try:
            safe_id(ann.bundle_id)
            self._check_version(ann.version, "announced")
            part = self._fetch(ann)
            root = self._unpack(ann, part)
        except DownloadError as exc:  # not the bundle's fault: a new announcement retries
            if not self._stop.is_set():  # (a download cut short by close() is no failure)
                self.report(REFUSED, ann.bundle_id, reason=f"download failed: {exc}")
            return
        except (EdgeError, BundleError) as exc:
            self._refuse(ann, str(exc))
            return
        try:
            runtime = self._load(root)
        except Exception as exc:  # any load failure: the device stays where it is
            self.slots.refuse(ann.bundle_id, f"failed to load: {exc}")
            self.report(ROLLED_BACK, ann.bundle_id, reason=f"failed to load: {exc}")
            return
        previous = self.holder.bundle_id
        self.holder.swap(runtime, ann.version, Probation(
            ann.probation_decisions, ann.min_decisions, ann.max_degraded_rate))
        log.info("edge %s: bundle %s (version %d) answers now, on probation; %s kept",
                 self.device, ann.bundle_id, ann.version, previous)
        self.report(PROBATION, ann.bundle_id, previous=previous)

    def _check_version(self, version: int, what: str) -> None:
        if version <= self.holder.version:
            raise Refusal(f"older: {what} version {version} is not above the active version "
                          f"{self.holder.version} (no downgrade)")

    def _fetch(self, ann: UpdateAnnouncement) -> Path:
        part = self.slots.part_path(ann.bundle_id)
        self.report(DOWNLOADING, ann.bundle_id)
        if ann.url:
            return fetch_url(ann, part)
        last = [time.monotonic()]

        def progress(share: float) -> None:
            if time.monotonic() - last[0] >= 1.0:
                last[0] = time.monotonic()
                self.report(DOWNLOADING, ann.bundle_id, progress=share)

        fetch = topic(self.device, "fetch", self.prefix)
        download = ChunkDownload(
            ann, part, lambda i: self.carrier.publish(
                fetch, encode_ota(ChunkRequest(self.device, ann.bundle_id, i)), qos=0),
            window=self._window, retry_s=self._retry_s, max_tries=self._max_tries,
            timeout_s=self._timeout_s)
        self._download = download
        try:
            return download.run(self._stop, progress)
        finally:
            self._download = None

    def _unpack(self, ann: UpdateAnnouncement, part: Path) -> Path:
        root = self.slots.unpack(part, ann.bundle_id)
        try:
            manifest = verify(root, trust=self.trust)
        except BundleError as exc:  # named by file, not by this device's folders
            where = f"{Path(exc.path).name}: " if exc.path else ""
            raise Refusal(f"verification failed: {where}{exc.message}") from exc
        if manifest.bundle_id != ann.bundle_id:
            raise Refusal(f"the image holds bundle {manifest.bundle_id}, not the announced "
                          f"{ann.bundle_id}")
        version = bundle_version(manifest)
        if version != ann.version:
            raise Refusal(f"the signed manifest says version {version}, the announcement "
                          f"{ann.version}")
        self._check_version(version, "signed")
        active = self.holder.manifest
        if (manifest.feature_names, [s.name for s in manifest.sensors]) != \
                (active.feature_names, [s.name for s in active.sensors]):
            raise Refusal("incompatible: the bundle reads other sensors or features than this "
                          "device's")
        return root

    def _refuse(self, ann: UpdateAnnouncement, reason: str) -> None:
        self.slots.refuse(ann.bundle_id, reason)
        log.warning("edge %s: refused bundle %s: %s", self.device, ann.bundle_id, reason)
        self.report(REFUSED, ann.bundle_id, reason=reason)

    def _settle(self, verdict: Verdict) -> None:
        """After a probation: record what is active and previous, close the retired runtime."""
        retired_id = verdict.retired.manifest.bundle_id
        verdict.retired.close()
        if verdict.kept:
            self.slots.commit(verdict.bundle_id, retired_id)
            self.report(ACTIVE, verdict.bundle_id, previous=retired_id)
            return
        self.slots.refuse(verdict.bundle_id, verdict.reason)
        self.slots.commit(self.holder.bundle_id, self.slots.state.get("previous", ""))
        log.warning("edge %s: rolled back bundle %s: %s", self.device, verdict.bundle_id,
                    verdict.reason)
        self.report(ROLLED_BACK, verdict.bundle_id, reason=verdict.reason)

    # -- status ------------------------------------------------------------------------------
    def report(self, state: str, bundle_id: str, *, reason: str = "", progress: float = 0.0,
               previous: str = "") -> None:
        """Publish an ``UpdateStatus`` (retained, QoS 1) and keep it in ``statuses``."""
        status = UpdateStatus(
            device=self.device, sent_at=time.time(), state=state, bundle_id=bundle_id[:1024],
            active_bundle_id=self.holder.bundle_id, active_version=self.holder.version,
            previous_bundle_id=previous or str(self.slots.state.get("previous", "")),
            rollout=self._rollouts.get(bundle_id, "")[:1024],
            progress=1.0 if state in (PROBATION, ACTIVE) else min(max(progress, 0.0), 1.0),
            reason=reason_text(reason))
        self.statuses.append(status)
        del self.statuses[:-1000]
        self.carrier.publish(telemetry_topic(self.device, self.prefix), encode_ota(status),
                             qos=1, retain=True)
