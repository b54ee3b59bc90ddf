"""Are a bundle's decisions the ones another bundle of the same training makes, row for row?

``compare_bundles``: each operating point both full bundles hold (by name), walked by the ONNX
oracle (``trainer.policy.oracle``) on the same rows: per row the escalation, the sensors read,
the local answer (the HPC's for an escalated row) and the cost must be equal. Used by
``benchmarks.device_bundle --compare OLD`` with OLD trained by the code before action heads
(each point its own ONNX file, threshold and margin weight baked in) and the bundle trained
with them (``protocol.action_head``): same data, same seeds, the same fits.

``edge_against_oracle``: the default point of a device bundle through ``EdgeRuntime.
predict_row`` (the device's path, one row at a time) against the oracle's batched walk of the
same point in the full bundle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt


def compare_bundles(new: Path, old: Path, X: npt.NDArray[np.float32]) -> dict[str, Any]:
    """Per-point mismatch counts between two full bundles' walks on ``X``."""
    from adaptedge.trainer.policy.oracle import BundleRunner

    a, b = BundleRunner.from_dir(new), BundleRunner.from_dir(old)
    old_points = {p.name: p.policy for p in b.manifest.operating_points}
    shared = [p for p in a.manifest.operating_points if p.name in old_points]
    mismatched: dict[str, int] = {}
    for point in shared:
        x, y = a.evaluate(point.policy, X), b.evaluate(old_points[point.name], X)
        same = ((x.escalated == y.escalated) & (x.sensors_read == y.sensors_read).all(axis=1)
                & (x.labels == y.labels) & (x.cost == y.cost))
        mismatched[point.name] = int((~same).sum())
    return {"points_compared": len(shared), "points_new": len(a.manifest.operating_points),
            "points_old": len(old_points), "rows": len(X),
            "mismatched_rows": sum(mismatched.values()),
            "points_with_mismatches": sorted(k for k, v in mismatched.items() if v)}


def edge_against_oracle(device: Path, full: Path, X: npt.NDArray[np.float32]
                        ) -> dict[str, Any]:
    """Rows where the device bundle's runtime differs from the oracle (escalation, local
    label of a stop, sensors read)."""
    from adaptedge.edge.runtime import EdgeRuntime
    from adaptedge.trainer.policy.oracle import BundleRunner

    runtime = EdgeRuntime.load(device)
    point = runtime.manifest.operating_point(runtime.manifest.default_operating_point)
    oracle = BundleRunner.from_dir(full)
    expected = oracle.evaluate(point.policy, X)
    names = np.asarray(expected.sensor_names)
    hpc = set(oracle.manifest.hpc.sensors)
    wrong = 0
    for i, row in enumerate(X):
        d = runtime.predict_row(row)
        read = set(names[expected.sensors_read[i]].tolist())
        local = read - hpc if d.escalated else read
        same = (d.escalated == bool(expected.escalated[i])
                and (d.escalated or d.label_index == int(expected.labels[i]))
                and set(d.sensors_read) - (hpc if d.escalated else set()) == local)
        wrong += not same
    return {"point": point.name, "rows": len(X), "mismatched_rows": wrong}
