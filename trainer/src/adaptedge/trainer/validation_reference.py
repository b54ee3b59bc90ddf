"""The drift monitor's reference figures of every operating point, measured on validation.

``metadata["drift_reference"]`` (``protocol.drift_reference``) per point: the escalation rate on
the validation rows and how often the local answers agree with the HPC on the rows answered
locally, walked on the exported ONNX (what the device runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.manifest import Manifest
from adaptedge.trainer.policy.oracle import BundleRunner, PolicyResult


@dataclass(frozen=True)
class ValidationWalks:
    """The exported ONNX walked once on the validation rows: the HPC's label per row and each
    policy's result (what ``export.bundle.paired_on_validation`` and ``validation_reference``
    both read, so the export walks every point once)."""

    hpc_labels: npt.NDArray[np.int64]
    results: dict[str, PolicyResult]


def validation_walks(manifest: Manifest, files: Mapping[str, bytes],
                     X_val: npt.ArrayLike, runner: BundleRunner | None = None
                     ) -> ValidationWalks:
    """Walk every policy of ``manifest``'s points, and the HPC, on ``X_val`` (float32); the
    policies on the usable cores' threads (onnxruntime releases the GIL; each walk is the one
    a single thread makes). ``runner``: that of ``manifest`` and ``files``, whose sessions
    an earlier walk created (default: a new one)."""
    from adaptedge.trainer.parallel import usable_cores

    runner = runner or BundleRunner.from_files(manifest, files)
    x = np.asarray(X_val, dtype=np.float32)
    hpc = np.asarray(np.argmax(runner.hpc_proba(x), axis=1), dtype=np.int64)
    policies = list(dict.fromkeys(p.policy for p in manifest.operating_points))
    with ThreadPoolExecutor(max_workers=max(1, min(usable_cores(), len(policies)))) as pool:
        results = list(pool.map(lambda name: runner.evaluate(name, x), policies))
    return ValidationWalks(hpc, dict(zip(policies, results, strict=True)))


def validation_reference(manifest: Manifest, files: Mapping[str, bytes],
                         X_val: npt.ArrayLike, walks: ValidationWalks | None = None
                         ) -> dict[str, dict[str, Any]]:
    """Point name -> ``{escalation_rate, n_rows, local_agreement, n_local}`` on ``X_val``
    (``walks``: the same rows already walked, ``validation_walks``)."""
    walks = walks or validation_walks(manifest, files, X_val)
    hpc = walks.hpc_labels
    out: dict[str, dict[str, Any]] = {}
    for point in manifest.operating_points:
        result = walks.results[point.policy]
        local = ~result.escalated
        agree = result.labels[local] == hpc[local]
        out[point.name] = {"escalation_rate": float(result.escalated.mean()),
                           "n_rows": len(hpc),
                           "local_agreement": float(agree.mean()) if local.any() else 1.0,
                           "n_local": int(local.sum())}
    return out
