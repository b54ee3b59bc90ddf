"""Bundle image downloads: a 5 MB bundle over a lossy link, resuming, URLs."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from adaptedge.cloud.rollout.announce import (
    ChunkServer,
    announce,
    announcement,
    build_image,
    start_threaded,
)
from adaptedge.cloud.transport.connection import make_client, parse_broker_url
from adaptedge.edge.ota_download import ChunkDownload, DownloadError, fetch_url
from adaptedge.protocol.bundle import read_manifest_body
from adaptedge.protocol.ota import ChunkReply
from adaptedge.simulator.brokers import MosquittoBroker
from adaptedge.simulator.proxy import ImpairedProxy
from tests.support.ota_fleet import Keys, new_keys, rewrite_file, start_device, versioned_bundle


def _padded_bundle(out: Path, keys: Keys, megabytes: float, seed: int) -> str:
    """A signed v2 toy bundle carrying ``megabytes`` of incompressible padding."""
    from adaptedge.protocol.bundle_signing import sign_bundle

    versioned_bundle(out, 2, None, seed=seed)
    padding = np.random.default_rng(seed).bytes(int(megabytes * (1 << 20)))
    bundle_id = rewrite_file(out, "padding.bin", padding)
    sign_bundle(out, keys.private)
    return bundle_id


@pytest.mark.broker
def test_a_5mb_bundle_downloads_over_a_link_losing_5_percent(mosquitto: MosquittoBroker,
                                                             tmp_path: Path) -> None:
    keys = new_keys(tmp_path / "keys")
    v1 = tmp_path / "v1"
    versioned_bundle(v1, 1, keys, seed=1)
    b2 = _padded_bundle(tmp_path / "v2", keys, 5.0, seed=2)
    image = build_image(tmp_path / "v2", tmp_path / "images")
    assert image.size > 5 << 20 and image.bundle_id == b2
    with ImpairedProxy(mosquitto.port, loss=0.05, delay_ms=2.0, seed=7) as proxy, \
            ChunkServer(mosquitto.url) as server:
        server.add(image)
        dev = start_device("dev1", v1, proxy.url, keys, tmp_path / "updates", version=1,
                           retry_s=0.5)
        try:
            admin = make_client("admin")
            start_threaded(admin, parse_broker_url(mosquitto.url))
            announce(admin, ["dev1"], announcement(image, rollout="big", probation_decisions=0,
                                                   min_decisions=0))
            admin.disconnect()
            admin.loop_stop()
            assert dev.wait_state("active", b2, 120.0), dev.follower.statuses[-1]
        finally:
            dev.close()
    dropped = sum(d.dropped for d in proxy.droppers)
    passed = sum(d.passed for d in proxy.droppers)
    assert dropped > 0 and dropped / (dropped + passed) < 0.15  # the link did lose messages
    assert server.counters["chunk_requests"] > len(image.chunk_hashes)  # lost ones re-asked
    kept = tmp_path / "updates" / "dev1" / "bundles" / b2
    assert read_manifest_body(kept)["bundle_id"] == b2


class _Loopback:
    """A chunk source in the test's own process: answers ``send(index)`` from the file,
    losing the chunks listed in ``lose`` the first time they are asked for."""

    def __init__(self, data: bytes, chunk: int, bundle_id: str, lose: set[int]) -> None:
        self.data, self.chunk, self.bundle_id, self.lose = data, chunk, bundle_id, lose
        self.download: ChunkDownload | None = None
        self.asked: list[int] = []

    def send(self, index: int) -> bool:
        self.asked.append(index)
        if index in self.lose:
            self.lose.discard(index)
            return True
        piece = self.data[index * self.chunk:(index + 1) * self.chunk]
        assert self.download is not None
        self.download.on_reply(ChunkReply(self.bundle_id, index, piece))
        return True


def test_downloads_resume_and_refuse_corrupt_chunks(tmp_path: Path) -> None:
    keys = new_keys(tmp_path / "keys")
    _padded_bundle(tmp_path / "b", keys, 0.2, seed=3)
    image = build_image(tmp_path / "b", tmp_path / "img", chunk_size=8192)
    ann = announcement(image, rollout="r")
    data = image.path.read_bytes()
    part = tmp_path / "dl" / "x.tar.part"
    part.parent.mkdir()
    half = ann.n_chunks // 2
    with part.open("wb") as fh:  # an earlier attempt got the first half, then a torn chunk
        fh.write(data[: half * 8192] + b"\x00" * 100)
    source = _Loopback(data, 8192, image.bundle_id, lose={half + 1, half + 3})
    download = ChunkDownload(ann, part, source.send, retry_s=0.05, timeout_s=20)
    source.download = download
    download.run(threading.Event())
    assert part.read_bytes() == data
    assert download.counters["chunks_resumed"] == half
    assert min(source.asked) == half  # nothing the part file already held was asked again
    assert source.asked.count(half + 1) == 2  # a lost chunk is asked for again

    download = ChunkDownload(ann, tmp_path / "dl" / "y.part", lambda i: True, retry_s=0.01,
                             max_tries=3, timeout_s=20)
    download.on_reply(ChunkReply(image.bundle_id, 0, b"bad"))  # not downloading yet: ignored
    with pytest.raises(DownloadError, match="did not arrive intact after 3"):
        download.run(threading.Event())


def test_a_bundle_downloads_from_a_file_or_http_url(tmp_path: Path) -> None:
    import functools
    import http.server

    keys = new_keys(tmp_path / "keys")
    versioned_bundle(tmp_path / "b", 3, keys, seed=4)
    image = build_image(tmp_path / "b", tmp_path / "img")
    ann = announcement(image, rollout="r", url=image.path.as_uri())
    got = fetch_url(ann, tmp_path / "dl.part")
    assert got.read_bytes() == image.path.read_bytes()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(image.path.parent))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"http://127.0.0.1:{httpd.server_address[1]}/{image.path.name}"
            got = fetch_url(announcement(image, rollout="r", url=url), tmp_path / "h.part")
            assert got.read_bytes() == image.path.read_bytes()
            with pytest.raises(DownloadError, match="404"):
                fetch_url(announcement(image, rollout="r", url=url + "x"), tmp_path / "x.part")
        finally:
            httpd.shutdown()
            thread.join(5)
    image.path.write_bytes(image.path.read_bytes()[:-1] + b"\x01")
    with pytest.raises(DownloadError, match="SHA-256 does not match"):
        fetch_url(ann, tmp_path / "dl2.part")
