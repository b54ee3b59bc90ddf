"""Several bundles behind one worker: one ``HpcInference`` per bundle id, loaded on first use.

During a rollout some devices escalate with the old bundle id and some with the new one; the
pool answers both. It reads every bundle's manifest at start (cheap: no model is opened) and
loads the HPCs at start in the order given, as far as ``max_loaded`` and ``max_bytes`` allow
(a load takes seconds for a large model, and on the request path every request waits behind
it: the README's rollout ``--bundle v1 --bundle v2`` stalled the worker 7 s at the swap); a
bundle not resident is loaded the first time a request names it, keeping at most
``max_loaded`` of them and at most ``max_bytes`` of HPC model files resident (least recently
used evicted first; the first bundle, the default, is never evicted). ``load_s`` adds up the
time spent loading, which the service core takes out of its compute time (a load is not the
time a row takes). A request naming a bundle the pool does not hold (or could not load) is
answered ``unknown_bundle``, as a single-bundle worker does; requests are routed by bundle
(``protocol.topics``), so that takes a request that names one bundle on another's topic, or a
load failure.

A device bundle (``protocol.device_bundle``: no HPC file, the HPC named by hash) is answered by
the cloud bundle whose HPC it names; one that names no HPC the pool holds is refused at start in
one line. Each cloud bundle also answers its own all-points device bundle (what ``adaptedge
train`` writes beside it and an OTA rollout ships).

Every bundle's hashes (and, with ``trust``, signer) are verified at start. The pool answers
the same calls as an ``HpcInference`` (``prepare``, ``error``,
``handle_batch``, ``error_counts``), so ``CloudService`` takes either.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.service.guard import DEFAULT_RUN_LIMIT_S
from adaptedge.cloud.service.inference import HpcInference, Reply
from adaptedge.protocol import errors as E
from adaptedge.protocol.bundle import open_bundle, verify
from adaptedge.protocol.device_bundle import (
    check_answers_for,
    device_bundle_id,
    device_manifest,
)
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.messages import ErrorReply, InferenceRequest
from adaptedge.protocol.topics import DEFAULT_PREFIX

log = logging.getLogger("adaptedge.cloud")
DEFAULT_MAX_LOADED = 4
DEFAULT_MAX_BYTES = 2 << 30


@dataclass(frozen=True, slots=True)
class PoolEntry:
    """A bundle the pool can serve: where it is and how big its HPC model is."""

    bundle_id: str
    root: Path
    hpc_bytes: int
    manifest: Manifest
    devices: list[Manifest] = field(default_factory=list)
    """The device bundles given that this bundle's HPC answers."""


def bundle_paths(bundles: Sequence[str | os.PathLike[str]],
                 bundle_dirs: Sequence[str | os.PathLike[str]] = ()) -> list[Path]:
    """The bundles given one by one, then every bundle (folder or ``.tar``) inside each of
    ``bundle_dirs``, in name order."""
    paths = [Path(b) for b in bundles]
    for folder in map(Path, bundle_dirs):
        if not folder.is_dir():
            raise CloudError(f"{folder}: is not a directory of bundles")
        paths += sorted(p for p in folder.iterdir() if not p.name.startswith(".")
                        and (p.suffix == ".tar" or (p / "manifest.json").is_file()))
    if not paths:
        raise CloudError("no bundle given: pass --bundle (repeatable) or --bundle-dir")
    return paths


class BundlePool:
    """The HPCs of several bundles, by id. Thread-safe: the service and a chunk server may
    share it."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]], *, prefix: str = DEFAULT_PREFIX,
                 run_limit_s: float = DEFAULT_RUN_LIMIT_S,
                 trust: Sequence[str | os.PathLike[str]] | None = None,
                 max_loaded: int = DEFAULT_MAX_LOADED, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_loaded < 1 or max_bytes < 1:
            raise CloudError(f"a bundle pool keeps >= 1 bundle and >= 1 byte resident, got "
                             f"max_loaded={max_loaded}, max_bytes={max_bytes}")
        self.prefix = prefix
        self._run_limit_s = run_limit_s
        self._trust = trust
        self.max_loaded, self.max_bytes = max_loaded, max_bytes
        self._stack = ExitStack()  # .tar bundles stay unpacked while the pool lives
        self.entries: dict[str, PoolEntry] = {}
        self.aliases: dict[str, str] = {}
        """Device bundle id -> the id of the cloud bundle whose HPC answers it."""
        self.device_roots: dict[str, Path] = {}
        """The device bundles given, by id (an OTA chunk server ships them)."""
        try:
            self._read(paths)
        except (BundleError, OSError, CloudError):
            self._stack.close()
            raise
        self.error_counts: Counter[str] = Counter()
        self.failed: dict[str, str] = {}
        """Bundles whose HPC failed to load on first use, and why (not retried)."""
        self._loaded: OrderedDict[str, HpcInference] = OrderedDict()
        self._lock = threading.RLock()
        self.loads = 0
        self.evictions = 0
        self.load_s = 0.0
        """Seconds spent loading HPCs, ever."""
        self.default = self._load(next(iter(self.entries)))  # verified now: fail fast
        self.bundle_id = self.default.bundle_id
        self._preload()

    def _read(self, paths: Sequence[str | os.PathLike[str]]) -> None:
        """Verify every bundle; pair each device bundle with the cloud bundle of its HPC."""
        devices: list[tuple[Manifest, Path]] = []
        for path in paths:
            root = Path(self._stack.enter_context(open_bundle(path)))
            manifest = verify(root, trust=self._trust)  # every bundle checked at start
            if not manifest.carries_hpc:
                self.device_roots.setdefault(manifest.bundle_id, root)
                devices.append((manifest, Path(path)))
            elif manifest.bundle_id not in self.entries:
                size = (root / manifest.hpc.file).stat().st_size
                self.entries[manifest.bundle_id] = PoolEntry(manifest.bundle_id, root, size,
                                                             manifest)
                self.aliases[device_bundle_id(manifest)] = manifest.bundle_id
        if not self.entries:
            raise CloudError("only device bundles given: they name their HPC but do not hold "
                             "it; add the cloud bundle they were cut from (--bundle CLOUD)")
        for device, path in devices:
            try:
                entry = self._cloud_of(device)
            except BundleError as exc:
                raise BundleError(exc.message, path=str(path)) from None
            entry.devices.append(device)
            self.aliases[device.bundle_id] = entry.bundle_id

    def _cloud_of(self, device: Manifest) -> PoolEntry:
        """The cloud bundle whose HPC answers ``device`` (the one it names first, then any
        holding the same HPC); ``BundleError`` in one line when none does."""
        named = self.entries.get(device.hpc.cloud_bundle or "")
        if named is not None:
            check_answers_for(named.manifest, device)
            return named
        for entry in self.entries.values():
            if entry.manifest.hpc_sha256 == device.hpc_sha256:
                check_answers_for(entry.manifest, device)
                return entry
        check_answers_for(next(iter(self.entries.values())).manifest, device)  # says why
        raise AssertionError("unreachable: the hashes differ")

    def _preload(self) -> None:
        """Load the other bundles now, in order, while they fit in the pool's bounds."""
        resident = self.entries[self.bundle_id].hpc_bytes
        for entry in list(self.entries.values())[1:]:
            if len(self._loaded) >= self.max_loaded or resident + entry.hpc_bytes > self.max_bytes:
                return
            if self.get(entry.bundle_id) is not None:
                resident += entry.hpc_bytes

    def manifest_of(self, bundle_id: str) -> Manifest | None:
        """The manifest a device running ``bundle_id`` holds, or None if not answered here."""
        cloud = self.entries.get(self.aliases.get(bundle_id, bundle_id))
        if cloud is None:
            return None
        if bundle_id == cloud.bundle_id:
            return cloud.manifest
        given = next((d for d in cloud.devices if d.bundle_id == bundle_id), None)
        return given or device_manifest(cloud.manifest)

    @property
    def bundle_ids(self) -> tuple[str, ...]:
        """The cloud bundles, then the device bundles they answer."""
        return (*self.entries, *(a for a in self.aliases if a not in self.entries))

    def serves(self, bundle_id: str) -> bool:
        """Whether a request of ``bundle_id`` is answered here (held, and not failed to load)."""
        bundle_id = self.aliases.get(bundle_id, bundle_id)
        return bundle_id in self.entries and bundle_id not in self.failed

    @property
    def loaded(self) -> tuple[str, ...]:
        """Bundle ids whose HPC is resident, least recently used first."""
        with self._lock:
            return tuple(self._loaded)

    def get(self, bundle_id: str) -> HpcInference | None:
        """The HPC of ``bundle_id`` (or of the cloud bundle answering device bundle
        ``bundle_id``), loaded now if it is not resident; None if not served."""
        bundle_id = self.aliases.get(bundle_id, bundle_id)
        with self._lock:
            inference = self._loaded.get(bundle_id)
            if inference is not None:
                self._loaded.move_to_end(bundle_id)
                return inference
            if bundle_id not in self.entries or bundle_id in self.failed:
                return None
            try:
                return self._load(bundle_id)
            except (CloudError, BundleError, OSError) as exc:  # changed on disk since start?
                self.failed[bundle_id] = str(exc)
                log.error("bundle %s cannot be loaded (%s); its requests are answered "
                          "unknown_bundle", bundle_id, exc)
                return None

    def _load(self, bundle_id: str) -> HpcInference:
        entry = self.entries[bundle_id]
        started = time.monotonic()
        try:
            inference = HpcInference.load(entry.root, prefix=self.prefix,
                                          run_limit_s=self._run_limit_s, trust=self._trust)
        finally:
            self.load_s += time.monotonic() - started
        inference.error_counts = self.error_counts  # one tally for the worker's stats
        for device in entry.devices:
            inference.answer_for(device)
        self.loads += 1
        self._loaded[bundle_id] = inference
        self._evict()
        return inference

    def _evict(self) -> None:
        def resident_bytes() -> int:
            return sum(self.entries[b].hpc_bytes for b in self._loaded)

        while len(self._loaded) > 1 and (len(self._loaded) > self.max_loaded
                                         or resident_bytes() > self.max_bytes):
            victim = next((b for b in self._loaded if b != self.bundle_id), None)
            if victim is None or victim == next(reversed(self._loaded)):
                return  # only the default and the newest left: keep both
            self._loaded.pop(victim).guard.close()
            self.evictions += 1

    # -- the HpcInference calls the service makes ------------------------------------------------
    def prepare(self, topic: str, payload: bytes | bytearray, now: float | None = None
                ) -> tuple[str, InferenceRequest | ErrorReply] | None:
        return self.default.prepare(topic, payload, now)

    def error(self, device: str, request_id: int | None, code: str, message: str,
              now: float | None = None) -> ErrorReply:
        return self.default.error(device, request_id, code, message, now)

    def handle_batch(self, requests: Sequence[InferenceRequest], now: float | None = None
                     ) -> list[Reply]:
        """Answer each request with its own bundle's HPC (one onnxruntime call per bundle)."""
        groups: dict[str, list[int]] = {}
        for i, req in enumerate(requests):
            groups.setdefault(req.bundle_id, []).append(i)
        replies: list[Reply | None] = [None] * len(requests)
        for bundle_id, rows in groups.items():
            inference = self.get(bundle_id)
            if inference is None:
                served = ", ".join(self.entries)
                for i in rows:
                    req = requests[i]
                    replies[i] = self.error(req.device, req.request_id, E.UNKNOWN_BUNDLE,
                                            f"this worker serves bundles {served}, not "
                                            f"{bundle_id!r}: update the device's bundle or "
                                            "give the worker this one", now)
                continue
            answers = inference.handle_batch([requests[i] for i in rows], now)
            for i, reply in zip(rows, answers, strict=True):
                replies[i] = reply
        return replies  # type: ignore[return-value]

    @property
    def answered(self) -> int:
        with self._lock:
            return sum(inf.answered for inf in self._loaded.values())

    def close(self) -> None:
        with self._lock:
            for inference in self._loaded.values():
                inference.guard.close()
            self._loaded.clear()
        self._stack.close()
