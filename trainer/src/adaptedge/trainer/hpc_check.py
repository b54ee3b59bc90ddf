"""Is the HPC worth escalating to? One warning line when its validation accuracy is not clearly
(with 97.5% confidence, a Wilson lower bound) above the majority class or the cheapest policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.operating_points import wilson_interval


def weak_hpc_warning(hpc_accuracy: float, y_train: npt.NDArray[np.int64],
                     y_val: npt.NDArray[np.int64], frontier: Sequence[Any]) -> str | None:
    """The warning (one line) or None. ``frontier``: policies with ``validation`` metrics."""
    low = wilson_interval(hpc_accuracy, len(y_val))[0]
    majority = float(np.mean(y_val == np.bincount(y_train).argmax()))
    hint = ("escalating buys little or makes answers worse; try another --hpc (e.g. logistic) "
            "or give it more data")
    if low <= majority:
        return (f"adaptedge: warning: the HPC's validation accuracy {hpc_accuracy:.4f} is not "
                f"clearly better than always answering the majority class ({majority:.4f}): "
                f"{hint}")
    cheapest = min(frontier, key=lambda p: p.validation.cost)
    if low <= cheapest.validation.accuracy:
        return (f"adaptedge: warning: the HPC's validation accuracy {hpc_accuracy:.4f} is not "
                f"clearly better than the cheapest policy's ({cheapest.validation.accuracy:.4f}, "
                f"cost {cheapest.validation.cost:.4g}): {hint}")
    return None
