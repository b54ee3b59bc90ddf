"""Device bundles against the full bundle: bytes stored and sent over the air, and the time
``EdgeRuntime.load`` takes, for the full bundle (HPC included), its all-points device bundle and
its one-point device bundle (the default point).

The bundle is ``--bundle DIR`` or, without it, ``adaptedge train --data letter-binary --method
adapt-gbrt`` (the default sweep, minutes) into a temporary folder. Each record: ``bundle``
(full / device-all / device-one), ``points``, ``files``, ``bytes`` (every file, manifest
included), ``image_bytes`` (the uncompressed ``.tar`` an OTA rollout sends),
``image_xz_bytes`` and ``image_xz_seconds`` (with ``--xz``: the ``fleet deploy --xz`` image, the
tar through ``xz -9e``, and the time compressing it took; none for the full bundle, which never
travels), ``load_ms_median`` and ``load_ms`` (``--loads`` loads, each a
fresh ``EdgeRuntime.load``: manifest, hashes of every file, sessions of the default point).
``equality`` (the bundle's dataset's test split, every row): the default point through the
one-point device bundle's ``EdgeRuntime.predict_row`` against the ONNX oracle on the full
bundle, and, with ``--compare OLD`` (the same training by the code before action heads), every
point both bundles hold walked on both (``benchmarks.decision_equality``). ``EdgeRuntime.load``
builds the default point's sessions only; other points' sessions are created when the device
switches to them (``load_ms`` does not include them).
``c_export`` gives the estimated Cortex-M0+ flash of the default point and, when it is over 256
KB, the most accurate point that fits (``adaptedge export c --flash-limit 256K``). ``profile``
(``benchmarks.bundle_profile``): where the all-points device bundle's bytes go (distinct models
and tree cores, the default point's bytes per ONNX attribute, its trees and splits) and what the
one-point bundle's load spends in ``verify`` and in sessions. The numbers depend on the
machine's load (``load_average`` is printed with them).

Run: ``python -m benchmarks.device_bundle [--bundle DIR] [--loads N] [--xz] [--compare OLD]
[--rows N]``; prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

FLASH_LIMIT = 256 * 1024


def _image_bytes(root: Path, out: Path, xz: bool) -> tuple[int, int | None, float | None]:
    """The bytes of the OTA image of a bundle (``build_image``: the uncompressed tar) and, with
    ``xz``, of the ``fleet deploy --xz`` image and the seconds its compression took."""
    from adaptedge.cloud.rollout.announce import build_image

    size = build_image(root, out).size
    if not xz:
        return size, None, None
    started = time.perf_counter()
    packed = build_image(root, out, xz=True).size
    return size, packed, round(time.perf_counter() - started, 2)


def _record(name: str, root: Path, work: Path, loads: int, xz: bool) -> dict[str, Any]:
    from adaptedge.edge.runtime import EdgeRuntime
    from adaptedge.protocol.bundle import verify

    manifest = verify(root)
    files = [p for p in root.iterdir() if p.is_file()]
    image, packed, xz_s = _image_bytes(root, work / f"image-{name}",
                                       xz and not manifest.carries_hpc)
    times = []
    for _ in range(loads):
        started = time.perf_counter()
        EdgeRuntime.load(root)
        times.append((time.perf_counter() - started) * 1000.0)
    return {"bundle": name, "bundle_id": manifest.bundle_id,
            "points": len(manifest.operating_points), "files": len(files),
            "bytes": sum(p.stat().st_size for p in files), "image_bytes": image,
            "image_xz_bytes": packed, "image_xz_seconds": xz_s, "load_ms_median": round(statistics.median(times), 2),
            "load_ms": [round(t, 2) for t in times]}


def _c_export(root: Path) -> dict[str, Any]:
    from adaptedge.protocol.bundle import verify
    from adaptedge.trainer.export.c.footprint import estimator

    manifest = verify(root)
    estimate = estimator(manifest, root)
    default = manifest.default_operating_point
    sized = [(p.name, p.accuracy, estimate(p.name)) for p in manifest.operating_points]
    fitting = [s for s in sized if s[2] <= FLASH_LIMIT]
    best = max(fitting, key=lambda s: (s[1], -s[2])) if fitting else None
    return {"default_point": default, "default_flash_bytes": estimate(default),
            "limit_bytes": FLASH_LIMIT, "default_fits": estimate(default) <= FLASH_LIMIT,
            "most_accurate_fitting": None if best is None else
            {"point": best[0], "accuracy": best[1], "flash_bytes": best[2]}}


def _profile(work: Path, loads: int) -> dict[str, Any]:
    from adaptedge.protocol.bundle import verify
    from benchmarks.bundle_profile import bytes_profile, load_profile

    every = work / "device-all"
    return {"bytes": bytes_profile(every, verify(every)),
            "load": load_profile(work / "device-one", max(loads, 1))}


def _equality(full: Path, work: Path, old: Path | None, rows: int | None) -> dict[str, Any]:
    from adaptedge.protocol.bundle import read_manifest
    from adaptedge.trainer.data.datasets import load_dataset
    from benchmarks.decision_equality import compare_bundles, edge_against_oracle

    dataset = str(read_manifest(full).metadata.get("dataset", ""))
    if not dataset:
        return {"skipped": "the bundle names no dataset (metadata.dataset)"}
    X = np.asarray(load_dataset(dataset).X_test[:rows], dtype=np.float32)
    out = {"dataset": dataset, "split": "test",
           "edge_vs_oracle": edge_against_oracle(work / "device-one", full, X)}
    if old is not None:
        out["against_old_bundle"] = {"old": str(old), **compare_bundles(full, old, X)}
    return out


def _trained(work: Path) -> Path:
    from adaptedge.trainer.api import train_bundle

    out = work / "letter-binary-adapt-gbrt"
    train_bundle("letter-binary", "adapt-gbrt", out, progress=False)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bundle", type=Path, help="a full bundle (default: train one)")
    parser.add_argument("--loads", type=int, default=10, help="loads per bundle (default 10)")
    parser.add_argument("--xz", action="store_true", help="also measure xz-compressed images")
    parser.add_argument("--compare", type=Path,
                        help="a full bundle of the same training made before action heads: "
                             "compare every shared point's decisions on the test split")
    parser.add_argument("--rows", type=int, help="test rows to compare (default: all)")
    args = parser.parse_args(argv)
    from adaptedge.protocol.bundle import verify
    from adaptedge.protocol.device_bundle import write_device_bundle

    with tempfile.TemporaryDirectory(prefix="adaptedge-devbench-") as tmp:
        work = Path(tmp)
        full = args.bundle or _trained(work)
        manifest = verify(full)
        write_device_bundle(full, manifest, work / "device-all")
        write_device_bundle(full, manifest, work / "device-one",
                            [manifest.default_operating_point])
        records = [_record("full", Path(full), work, args.loads, args.xz),
                   *(_record(n, work / n, work, args.loads, args.xz)
                     for n in ("device-all", "device-one"))]
        result = {"benchmark": "device_bundle", "source": str(full),
                  "load_average": os.getloadavg(), "results": records,
                  "c_export": _c_export(Path(full)), "profile": _profile(work, args.loads),
                  "equality": _equality(Path(full), work, args.compare, args.rows)}
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
