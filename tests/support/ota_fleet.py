"""Over-the-air test fleet: versioned signed toy bundles and in-process devices under load.

A ``LoadedDevice`` is a real device stack (``MqttUplink`` to a real broker, ``EdgeRuntime``,
``SwitchableRuntime``, ``UpdateFollower``) whose own thread makes decisions continuously on
seeded random rows and records, for each decision index, the bundle that answered and how.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from adaptedge.edge import EdgeRuntime, MqttUplink
from adaptedge.edge.bundle_slots import BundleSlots
from adaptedge.edge.switchable import SwitchableRuntime
from adaptedge.edge.updates import UpdateFollower
from adaptedge.protocol.bundle import read_manifest_body
from adaptedge.protocol.bundle_digest import MANIFEST_NAME, manifest_digest
from adaptedge.protocol.bundle_signing import sign_bundle
from adaptedge.protocol.bundle_version import stamp_version
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.signing import write_keypair
from tests.support.toy_bundle import DEFAULT_DEADLINE_MS, build_toy_bundle


@dataclass(frozen=True)
class Keys:
    private: Path
    public: Path


def new_keys(folder: Path) -> Keys:
    private, public = write_keypair(folder)
    return Keys(private, public)


def versioned_bundle(out: Path, version: int, keys: Keys | None, *, seed: int = 0,
                     deadline_ms: float = DEFAULT_DEADLINE_MS) -> Manifest:
    """The toy bundle (weights from ``seed``, escalation deadline ``deadline_ms``) at
    ``version``, signed with ``keys`` if given."""
    build_toy_bundle(out, seed=seed, deadline_ms=deadline_ms)
    manifest = stamp_version(out, version)
    if keys is not None:
        sign_bundle(out, keys.private)
    return manifest


def rewrite_file(bundle: Path, name: str, data: bytes) -> str:
    """Write ``name`` into a bundle and re-hash the manifest as an exporter would (any signature
    then no longer matches); returns the new bundle id."""
    (bundle / name).write_bytes(data)
    body = read_manifest_body(bundle)
    body["files"][name] = hashlib.sha256(data).hexdigest()
    body["bundle_id"] = manifest_digest(body)
    (bundle / MANIFEST_NAME).write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    return str(body["bundle_id"])


@dataclass
class Record:
    index: int
    bundle_id: str | None
    source: str
    error: str | None


@dataclass
class LoadedDevice:
    name: str
    holder: SwitchableRuntime
    uplink: MqttUplink
    follower: UpdateFollower
    records: list[Record] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def run(self, rate_hz: float, seed: int) -> None:
        rng = np.random.default_rng(seed)
        period = 1.0 / rate_hz
        i = 0
        next_at = time.monotonic()
        while not self.stop.is_set() and i < 1_000_000:
            d = self.holder.predict_row(rng.normal(size=3).astype(np.float32))
            self.records.append(Record(i, d.bundle_id, d.source, d.error))
            i += 1
            next_at += period
            self.stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self, rate_hz: float = 100.0, seed: int = 0) -> LoadedDevice:
        self.thread = threading.Thread(target=self.run, args=(rate_hz, seed), daemon=True)
        self.thread.start()
        return self

    def wait_decisions(self, n: int, timeout_s: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout_s
        start = len(self.records)
        while len(self.records) - start < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return len(self.records) - start >= n

    def wait_state(self, state: str, bundle_id: str, timeout_s: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(s.state == state and s.bundle_id == bundle_id
                   for s in self.follower.statuses):
                return True
            time.sleep(0.02)
        return False

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
        self.holder.close()
        self.uplink.close()


def start_device(name: str, bundle: Path, broker_url: str, keys: Keys, updates: Path, *,
                 version: int, retry_s: float = 0.3, window: int = 8,
                 max_tries: int = 50) -> LoadedDevice:
    """A device on ``bundle`` following updates through ``broker_url`` (not yet deciding)."""
    uplink = MqttUplink(broker_url, name).start()
    assert uplink.wait_connected(10.0), uplink.last_error

    def load(root: Path) -> EdgeRuntime:
        return EdgeRuntime.load(root, uplink=uplink, trust=[keys.public])

    runtime = load(bundle)
    holder = SwitchableRuntime(runtime, version)
    follower = UpdateFollower(holder, uplink, BundleSlots(updates / name), trust=[keys.public],
                              load=load, retry_s=retry_s, window=window,
                              max_tries=max_tries).start()
    return LoadedDevice(name, holder, uplink, follower)
