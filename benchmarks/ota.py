"""Over-the-air download speed: a bundle image in chunks over MQTT through a lossy link.

    python -m benchmarks.ota [--megabytes 5] [--loss 0,0.05,0.2] [--seed 0]

A private mosquitto, the cloud's ``ChunkServer`` on it, and a device-side ``ChunkDownload``
through an ``MqttUplink`` connected via the impairment proxy, which drops each QoS 0 message
with probability ``loss`` (both directions). Per loss: seconds, MB/s, chunk requests per chunk
needed, and the share of messages the proxy really dropped. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np


def _run(megabytes: float, loss: float, seed: int, work: Path) -> dict[str, Any]:
    from adaptedge.cloud.rollout.announce import BundleImage, ChunkServer, announcement
    from adaptedge.edge import MqttUplink
    from adaptedge.edge.ota_download import ChunkDownload
    from adaptedge.protocol.ota import ChunkRequest, decode_ota, encode_ota
    from adaptedge.simulator.brokers import MosquittoBroker
    from adaptedge.simulator.proxy import ImpairedProxy

    data = np.random.default_rng(seed).bytes(int(megabytes * (1 << 20)))
    chunk = 64 << 10
    path = work / f"image-{loss}.tar"
    path.write_bytes(data)
    pieces = tuple(hashlib.sha256(data[i:i + chunk]).digest()
                   for i in range(0, len(data), chunk))
    image = BundleImage(path, "bench", 1, len(data), hashlib.sha256(data).digest(), chunk,
                        pieces)
    ann = announcement(image, rollout="bench")
    with MosquittoBroker() as broker, ImpairedProxy(broker.port, loss=loss, seed=seed) as proxy, \
            ChunkServer(broker.url) as server, MqttUplink(proxy.url, "bench-dev") as uplink:
        server.add(image)
        assert uplink.wait_connected(10.0)
        part = work / f"dl-{loss}.part"
        download = ChunkDownload(ann, part, lambda i: uplink.publish(
            "adaptedge/v1/bench-dev/fetch", encode_ota(ChunkRequest("bench-dev", "bench", i))),
            retry_s=0.5)
        uplink.add_channel("adaptedge/v1/bench-dev/chunk",
                           lambda payload, retained: download.on_reply(decode_ota(payload)))
        time.sleep(0.2)  # let the SUBSCRIBE reach the broker
        started = time.perf_counter()
        download.run(threading.Event())
        seconds = time.perf_counter() - started
        dropped = sum(d.dropped for d in proxy.droppers)
        passed = sum(d.passed for d in proxy.droppers)
    assert part.read_bytes() == data
    return {"loss": loss, "megabytes": megabytes, "chunks": len(pieces), "seconds":
            round(seconds, 3), "mb_per_s": round(megabytes / seconds, 2),
            "requests_per_chunk": round(download.counters["chunks_requested"] / len(pieces), 3),
            "dropped_share": round(dropped / max(1, dropped + passed), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=5.0)
    parser.add_argument("--loss", default="0,0.05,0.2")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="adaptedge-bench-ota-") as tmp:
        runs = [_run(args.megabytes, float(x), args.seed, Path(tmp))
                for x in args.loss.split(",")]
    print(json.dumps({"benchmark": "ota_download", "seed": args.seed, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
