"""The cloud side of an over-the-air rollout: bundle images, announcements, a chunk server.

A bundle travels as an uncompressed ``.tar`` (a directory is packed deterministically: sorted
names, zero times and owners), its *image*. ``announce`` publishes an ``UpdateAnnouncement`` of
an image on each chosen device's ``update`` topic, retained, so a device that connects later
still finds it; ``withdraw`` clears it. ``ChunkServer`` answers ``ChunkRequest``s on every
device's ``fetch`` topic with the chunk's bytes on that device's ``chunk`` topic (QoS 0: a lost
chunk is asked for again, which is what makes downloads resumable); it stays silent about
bundles it does not hold, so several servers can share the fetch topics. It runs beside the
``CloudService`` with its own MQTT client (``cloud serve --serve-updates``, ``fleet deploy
--serve``).
"""

from __future__ import annotations

import hashlib
import logging
import lzma
import os
import tarfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt

from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.transport.connection import (
    BrokerAddress,
    TlsFiles,
    make_client,
    parse_broker_url,
)
from adaptedge.protocol.bundle import open_bundle, read_manifest, read_manifest_body, verify
from adaptedge.protocol.bundle_digest import SIGNATURE_NAME
from adaptedge.protocol.bundle_version import bundle_version
from adaptedge.protocol.device_bundle import device_bundle_id, write_device_bundle
from adaptedge.protocol.errors import ProtocolError
from adaptedge.protocol.ota import (
    DEFAULT_CHUNK_BYTES,
    MAX_CHUNK_BYTES,
    MAX_CHUNKS,
    ChunkReply,
    ChunkRequest,
    UpdateAnnouncement,
    decode_ota,
    encode_ota,
)
from adaptedge.protocol.topics import DEFAULT_PREFIX, parse, topic, wildcard

log = logging.getLogger("adaptedge.rollout")


@dataclass(frozen=True, slots=True)
class BundleImage:
    """The bytes a device downloads: a ``.tar`` of one bundle, with its hashes."""

    path: Path
    bundle_id: str
    version: int
    size: int
    sha256: bytes
    chunk_size: int
    chunk_hashes: tuple[bytes, ...] = field(repr=False)

    def read_chunk(self, index: int) -> bytes:
        with self.path.open("rb") as fh:
            fh.seek(index * self.chunk_size)
            return fh.read(self.chunk_size)


def pack_bundle(root: Path, out: Path, bundle_id: str) -> Path:
    """A deterministic uncompressed tar of the bundle directory ``root`` (one top folder)."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    with tarfile.open(tmp, "w", format=tarfile.USTAR_FORMAT) as tar:
        top = tarfile.TarInfo(bundle_id)
        top.type, top.mode, top.mtime = tarfile.DIRTYPE, 0o755, 0
        tar.addfile(top)
        for path in sorted(p for p in root.iterdir() if p.is_file()):
            info = tarfile.TarInfo(f"{bundle_id}/{path.name}")
            info.size, info.mode, info.mtime = path.stat().st_size, 0o644, 0
            with path.open("rb") as fh:
                tar.addfile(info, fh)
    os.replace(tmp, out)
    return out


def device_part(root: Path, work_dir: Path, *,
                trust: Sequence[str | os.PathLike[str]] | None = None) -> Path | None:
    """The all-points device bundle of the full bundle ``root``, cut into ``work_dir`` (None
    when ``root`` is a device bundle already). A signed bundle, or one that must be (``trust``),
    is refused: its device part would ship unsigned."""
    manifest = read_manifest(root)
    if not manifest.carries_hpc:
        return None
    if trust is not None or (root / SIGNATURE_NAME).exists():
        raise CloudError(f"{root}: is a signed full bundle; over the air only its device part "
                         "travels, which must be signed too: run `adaptedge export device "
                         "--bundle B --out D --key K` and deploy D")
    out = work_dir / f"{device_bundle_id(manifest)}.device"
    write_device_bundle(root, manifest, out, force=True)
    return out


def compress_image(tar: Path, out: Path) -> Path:
    """``tar`` through xz (preset 9, extreme: a 64 MiB window, so points that share trees
    across a device bundle's files compress together; decompressing needs ~65 MiB);
    an image that is xz already is returned as it is."""
    with tar.open("rb") as fh:
        if fh.read(6) == b"\xfd7zXZ\x00":
            return tar
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    comp = lzma.LZMACompressor(format=lzma.FORMAT_XZ, preset=9 | lzma.PRESET_EXTREME)
    with tar.open("rb") as src, tmp.open("wb") as dst:
        while block := src.read(1 << 20):
            dst.write(comp.compress(block))
        dst.write(comp.flush())
    os.replace(tmp, out)
    return out


def build_image(bundle: str | os.PathLike[str], work_dir: str | os.PathLike[str], *,
                chunk_size: int = DEFAULT_CHUNK_BYTES,
                trust: Sequence[str | os.PathLike[str]] | None = None,
                check: bool = True, device_only: bool = False, xz: bool = False) -> BundleImage:
    """The image of a bundle directory or ``.tar`` (a ``.tar`` is sent as it is). With
    ``check`` the bundle is verified first (hashes; with ``trust`` its signer too). With
    ``device_only`` a full bundle ships as its device part (``device_part``); with ``xz`` the
    image is the tar through ``xz -9e`` (``compress_image``)."""
    if not 0 < chunk_size <= MAX_CHUNK_BYTES:
        raise CloudError(f"chunk size must be in 1..{MAX_CHUNK_BYTES} bytes, got {chunk_size}")
    source = Path(bundle)
    with open_bundle(source) as root:
        if check:
            verify(root, trust=trust)
        if device_only:
            Path(work_dir).mkdir(parents=True, exist_ok=True)
            cut = device_part(Path(root), Path(work_dir), trust=trust)
            root, source = (cut, cut) if cut is not None else (root, source)
        body = read_manifest_body(root)
        bundle_id, version = str(body.get("bundle_id")), bundle_version(body)
        if source.is_dir():
            Path(work_dir).mkdir(parents=True, exist_ok=True)
            image = pack_bundle(Path(root), Path(work_dir) / f"{bundle_id}.tar", bundle_id)
        else:
            image = source
    if xz:
        image = compress_image(image, Path(work_dir) / f"{bundle_id}.tar.xz")
    size = image.stat().st_size
    if -(-size // chunk_size) > MAX_CHUNKS:
        raise CloudError(f"{image}: {size} bytes make more than {MAX_CHUNKS} chunks of "
                         f"{chunk_size}: use a larger --chunk-size")
    whole, pieces = hashlib.sha256(), []
    with image.open("rb") as fh:
        while data := fh.read(chunk_size):
            whole.update(data)
            pieces.append(hashlib.sha256(data).digest())
    return BundleImage(image, bundle_id, version, size, whole.digest(), chunk_size,
                       tuple(pieces))


def announcement(image: BundleImage, *, rollout: str, url: str = "",
                 probation_decisions: int = 200, min_decisions: int = 20,
                 max_degraded_rate: float = 0.2) -> UpdateAnnouncement:
    return UpdateAnnouncement(
        rollout=rollout, bundle_id=image.bundle_id, version=image.version, size=image.size,
        sha256=image.sha256, chunk_size=image.chunk_size, chunk_hashes=list(image.chunk_hashes),
        issued_at=time.time(), url=url, probation_decisions=probation_decisions,
        min_decisions=min_decisions, max_degraded_rate=max_degraded_rate)


def _publish_all(client: mqtt.Client, topics: Iterable[str], payload: bytes,
                 timeout_s: float) -> None:
    infos = [client.publish(t, payload, qos=1, retain=True) for t in topics]
    deadline = time.monotonic() + timeout_s
    for info in infos:
        info.wait_for_publish(max(0.01, deadline - time.monotonic()))
        if not info.is_published():
            raise CloudError("the broker did not acknowledge an announcement within "
                             f"{timeout_s:g} s: check the broker and its ACL (update topics)")


def announce(client: mqtt.Client, devices: Sequence[str], message: UpdateAnnouncement, *,
             prefix: str = DEFAULT_PREFIX, timeout_s: float = 10.0) -> None:
    """Publish ``message`` retained on each device's ``update`` topic (the client's loop must
    be running)."""
    _publish_all(client, (topic(d, "update", prefix) for d in devices), encode_ota(message),
                 timeout_s)


def withdraw(client: mqtt.Client, devices: Sequence[str], *, prefix: str = DEFAULT_PREFIX,
             timeout_s: float = 10.0) -> None:
    """Clear the retained announcement of each device."""
    _publish_all(client, (topic(d, "update", prefix) for d in devices), b"", timeout_s)


def start_threaded(client: mqtt.Client, address: BrokerAddress, timeout_s: float = 10.0) -> None:
    """Connect and run the client's loop in paho's thread (which reconnects by itself); wait
    for the CONNACK. ``CloudError`` if the broker is unreachable or refuses. The client's own
    ``on_connect`` (set before) still runs on every connection."""
    outcome: list[Any] = []
    own: Any = client.on_connect

    def on_connect(c: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        outcome.append(reason)
        if own is not None:
            own(c, userdata, flags, reason, props)

    client.on_connect = on_connect
    try:
        client.connect(address.host, address.port, keepalive=30)
    except (OSError, ValueError) as exc:
        raise CloudError(f"cannot reach the MQTT broker at {address.host}:{address.port} "
                         f"({exc}): check --broker and that the broker is running") from exc
    client.loop_start()
    deadline = time.monotonic() + timeout_s
    while not outcome and time.monotonic() < deadline:
        time.sleep(0.01)
    if not outcome or outcome[0].is_failure:
        client.disconnect()
        client.loop_stop()
        why = f"refused the connection: {outcome[0]}" if outcome else \
            f"sent no CONNACK within {timeout_s:g} s"
        raise CloudError(f"the broker at {address.host}:{address.port} {why} (check "
                         "--username/--password-file and the broker's ACL)")


class ChunkServer:
    """Answers chunk requests for the images it holds, over its own MQTT client."""

    def __init__(self, broker_url: str, *, prefix: str = DEFAULT_PREFIX,
                 client_id: str | None = None, username: str | None = None,
                 password: str | None = None, tls: TlsFiles | None = None) -> None:
        self.address = parse_broker_url(broker_url)
        self.prefix = prefix
        self.images: dict[str, BundleImage] = {}
        self._lock = threading.Lock()
        self.counters = {"chunk_requests": 0, "chunks_sent": 0, "bytes_sent": 0,
                         "chunk_refusals": 0, "bad_fetches": 0}
        self.client = make_client(client_id or f"adaptedge-rollout-{os.getpid()}",
                                  username=username, password=password, tls=tls,
                                  use_tls=tls is not None or self.address.tls)
        self.client.on_message = self._on_message
        self._filter = wildcard("fetch", prefix)

    def add(self, image: BundleImage) -> None:
        with self._lock:
            self.images[image.bundle_id] = image

    def start(self) -> ChunkServer:
        """Connect (``CloudError`` if the broker is unreachable or refuses) and serve in paho's
        thread (it reconnects and subscribes again by itself)."""
        self.client.on_connect = self._on_connect
        start_threaded(self.client, self.address)
        return self

    def stop(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def __enter__(self) -> ChunkServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any,
                    props: Any) -> None:
        if not reason.is_failure:
            client.subscribe(self._filter, qos=0)  # clean session: subscribe again

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        try:
            self._answer(client, message)
        except Exception:  # a bug or a vanished file must not stop the server
            self.counters["bad_fetches"] += 1
            log.exception("chunk server: failed on a fetch; continuing")

    def _answer(self, client: mqtt.Client, message: mqtt.MQTTMessage) -> None:
        try:
            device = parse(message.topic, self.prefix).device
            request = decode_ota(message.payload)
        except (ProtocolError, UnicodeDecodeError):
            self.counters["bad_fetches"] += 1
            return
        if type(request) is not ChunkRequest or request.device != device or message.retain:
            self.counters["bad_fetches"] += 1  # a device asks for itself only
            return
        self.counters["chunk_requests"] += 1
        with self._lock:
            image = self.images.get(request.bundle_id)
        if image is None or request.index >= len(image.chunk_hashes):
            # Silent: another server (another worker, fleet deploy --serve) may hold it; a
            # device nobody answers gives up after its retries.
            self.counters["chunk_refusals"] += 1
            return
        try:
            data = image.read_chunk(request.index)
        except OSError as exc:
            reply = ChunkReply(image.bundle_id, request.index, b"",
                               f"cannot read chunk {request.index}: {exc.strerror}")
        else:
            reply = ChunkReply(image.bundle_id, request.index, data)
            self.counters["chunks_sent"] += 1
            self.counters["bytes_sent"] += len(data)
        client.publish(topic(device, "chunk", self.prefix), encode_ota(reply), qos=0)
