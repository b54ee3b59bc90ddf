"""Class labels of the scikit-learn estimators: strings or any integers in, the same labels out
(``classes_``), class indices inside."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray


def class_indices(y: Any, hpc_proba: Any) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """``(classes_, indices)``: the sorted distinct labels of ``y`` and each row's index into
    them. With ``hpc_proba`` and integer ``y``, ``y`` already holds indices into its columns
    (the trainer's own calls, where a subset may miss a class): ``classes_`` is ``arange``."""
    labels = np.asarray(y)
    if hpc_proba is not None and np.issubdtype(labels.dtype, np.integer):
        return np.arange(np.asarray(hpc_proba).shape[-1]), labels.astype(np.int64)
    classes, inverse = np.unique(labels, return_inverse=True)
    return classes, np.asarray(inverse, dtype=np.int64).reshape(labels.shape)


def predicted_labels(classes: NDArray[Any], proba: NDArray[np.floating]) -> NDArray[Any]:
    """The label of each row's most probable class."""
    out: NDArray[Any] = classes[np.argmax(proba, axis=1)]
    return out
