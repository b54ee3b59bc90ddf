"""The drift monitor's reference figures of every operating point, measured on validation.

``metadata["drift_reference"]`` (``protocol.drift_reference``) per point: the escalation rate on
the validation rows and how often the local answers agree with the HPC on the rows answered
locally, walked on the exported ONNX (what the device runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.manifest import Manifest
from adaptedge.trainer.policy.oracle import BundleRunner


def validation_reference(manifest: Manifest, files: Mapping[str, bytes],
                         X_val: npt.ArrayLike) -> dict[str, dict[str, Any]]:
    """Point name -> ``{escalation_rate, n_rows, local_agreement, n_local}`` on ``X_val``."""
    runner = BundleRunner.from_files(manifest, files)
    x = np.asarray(X_val, dtype=np.float32)
    hpc = np.argmax(runner.hpc_proba(x), axis=1)
    out: dict[str, dict[str, Any]] = {}
    for point in manifest.operating_points:
        result = runner.evaluate(point.policy, x)
        local = ~result.escalated
        agree = result.labels[local] == hpc[local]
        out[point.name] = {"escalation_rate": float(result.escalated.mean()),
                           "n_rows": len(x),
                           "local_agreement": float(agree.mean()) if local.any() else 1.0,
                           "n_local": int(local.sum())}
    return out
